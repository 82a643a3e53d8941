"""Operator verbs: `waypost migrate` brings a store's schema up to date now; `waypost doctor`
checks what a store needs to be trusted: that it answers, its schema version, and its
durability settings (SQLite) or the clock skew between this host and the database
(PostgreSQL, where hosts compare times written by one another).
"""

from __future__ import annotations

import contextlib
import enum
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from waypost.cli.context import Ctx, duration, verb
from waypost.durations import utcnow
from waypost.errors import NotFound, WaypostError
from waypost.store import POSTGRES_SCHEMES, Store, open_postgres, sqlite_path
from waypost.store.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from waypost.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from waypost.store.postgres import PostgresStore

DEFAULT_MAX_SKEW = 2.0  # seconds: liveness and leases compare times written on other hosts


class Status(enum.StrEnum):
    OK = "ok"  # as it should be
    WARN = "warn"  # works, but look at it
    FAIL = "fail"  # needs fixing: doctor exits 1


class Check(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    status: Status
    detail: str


class SchemaState(msgspec.Struct, frozen=True, kw_only=True):
    version: int  # the newest migration applied to the store
    latest: int  # the newest migration this waypost ships
    # the migrations this command applied; None on SQLite, which upgrades itself on open
    applied_now: tuple[int, ...] | None = None


def schema_state(store: Store) -> SchemaState:
    if isinstance(store, SqliteStore):
        return SchemaState(version=int(str(store.pragmas()["schema_version"])),
                           latest=SQLITE_SCHEMA_VERSION)
    pg = _as_postgres(store)
    applied, latest = pg.schema_status()
    return SchemaState(version=max(applied, default=0), latest=latest,
                       applied_now=tuple(pg.migrated_now))


def _as_postgres(store: Store) -> PostgresStore:
    from waypost.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore), f"unknown store {store!r}"
    return store


# --- migrate ----------------------------------------------------------------------------


@click.command()
@verb
def migrate(ctx: Ctx) -> None:
    """Create or upgrade the store's schema now (every verb also does it when it opens the
    store; run this once before upgrading many hosts)."""
    state = schema_state(ctx.store)
    if state.applied_now is None:
        done = "up to date (SQLite upgrades itself whenever it is opened)"
    elif state.applied_now:
        done = f"applied migration(s) {', '.join(map(str, state.applied_now))}"
    else:
        done = "already up to date"
    ctx.emit({"store": ctx.store.url, "schema_version": state.version,
              "latest": state.latest, "applied": state.applied_now},
             f"{ctx.store.url}: schema version {state.version}, {done}")


# --- doctor -----------------------------------------------------------------------------


@click.command()
@click.option("--max-skew", default=f"{DEFAULT_MAX_SKEW:g}s", show_default=True,
              metavar="DURATION",
              help="Clock skew with the database above this fails (PostgreSQL).")
@verb
def doctor(ctx: Ctx, max_skew: str) -> None:
    """Check the store: connection, schema version, durability (SQLite) and clock skew
    (PostgreSQL). Exits 1 when a check fails. Never creates or migrates a PostgreSQL
    schema."""
    url, checks = diagnose(ctx, duration(max_skew) or 0.0)
    failed = [c.name for c in checks if c.status is Status.FAIL]
    summary = f"{len(failed)} check(s) failed: {', '.join(failed)}" if failed else "all good"
    ctx.emit({"store": url, "ok": not failed, "checks": checks},
             "\n".join([f"waypost doctor: {url}", *map(_row, checks), summary]))
    if failed:
        raise click.exceptions.Exit(1)


def _row(check: Check) -> str:
    return f"  {check.status.value:<5} {check.name:<14} {check.detail}"


def diagnose(ctx: Ctx, max_skew: float) -> tuple[str, list[Check]]:
    """(the store as shown, the checks): stops after a failed connection."""
    postgres = bool(ctx.store_url and ctx.store_url.startswith(POSTGRES_SCHEMES))
    try:
        store, elapsed_ms = _open_as_found(ctx, postgres)
    except WaypostError as exc:
        detail = f"{exc.message} (next: {exc.hint})" if exc.hint else exc.message
        return (ctx.store_url or "(default: .waypost/ found upward)",
                [Check(name="connect", status=Status.FAIL, detail=detail)])
    if not postgres:
        return store.url, _sqlite_checks(store, elapsed_ms)
    with store:
        return store.url, _postgres_checks(_as_postgres(store), elapsed_ms, max_skew)


def _open_as_found(ctx: Ctx, postgres: bool) -> tuple[Store, float]:
    """The store and how long opening it took, creating nothing and migrating no
    PostgreSQL schema."""
    if postgres:  # load the driver first: "opened in" times the connection, not the import
        with contextlib.suppress(ImportError):
            import waypost.store.postgres  # noqa: F401
    began = time.perf_counter()
    if postgres and ctx.store_url:
        store: Store = open_postgres(ctx.store_url, migrate_schema=False)
    elif ctx.store_url and not Path(sqlite_path(ctx.store_url)).is_file():
        raise NotFound(f"no SQLite store at {sqlite_path(ctx.store_url)}",
                       hint=f"create it with: waypost init --store {ctx.store_url}")
    else:
        store = ctx.store
    return store, (time.perf_counter() - began) * 1000


def _schema_check(state: SchemaState) -> Check:
    if state.version == state.latest:
        return Check(name="schema", status=Status.OK, detail=f"version {state.version} (latest)")
    if state.version > state.latest:
        return Check(name="schema", status=Status.WARN,
                     detail=f"version {state.version} is newer than this waypost knows "
                     f"({state.latest}): upgrade waypost on this host")
    return Check(name="schema", status=Status.FAIL,
                 detail=f"version {state.version}, but this waypost needs {state.latest}: "
                 "run waypost migrate")


def _watchers_check(store: Store) -> list[Check]:
    """The live watchers and their roles: what covers the runs (never a failure)."""
    live = [f"{w.id} {w.role.value} ({f'runs of {w.owner}' if w.owner else 'every run'})"
            for w in store.watchers(now=utcnow())]
    detail = (", ".join(live) if live else
              "none running: nobody notices a silent worker (start one: waypost watch)")
    return [Check(name="watchers", status=Status.OK, detail=detail)]


def _sqlite_checks(store: Store, elapsed_ms: float) -> list[Check]:
    assert isinstance(store, SqliteStore)
    pragmas: dict[str, Any] = store.pragmas()
    journal, sync = str(pragmas["journal_mode"]), str(pragmas["synchronous"])
    schema = _schema_check(schema_state(store))
    return [
        Check(name="connect", status=Status.OK, detail=f"SQLite, opened in {elapsed_ms:.0f} ms"),
        schema,
        Check(name="journal_mode", status=Status.OK if journal == "wal" else Status.FAIL,
              detail=journal if journal == "wal" else f"{journal}, not wal: writers block "
              "readers (the file system may not support WAL; keep the store on a local disk)"),
        Check(name="synchronous", status=Status.OK if sync == "full" else Status.FAIL,
              detail=sync if sync == "full" else f"{sync}, not full: a power cut may lose "
              "acknowledged writes"),
        *(_watchers_check(store) if schema.status is Status.OK else []),
    ]


def _postgres_checks(store: PostgresStore, elapsed_ms: float, max_skew: float) -> list[Check]:
    before = utcnow()
    server_now, version = store.server_clock()
    after = utcnow()
    schema = _schema_check(schema_state(store))
    return [
        Check(name="connect", status=Status.OK,
              detail=f"PostgreSQL {version.split()[0]}, schema {store.schema}, "
              f"opened in {elapsed_ms:.0f} ms"),
        schema,
        _skew_check((server_now - (before + (after - before) / 2)), after - before, max_skew),
        *(_watchers_check(store) if schema.status is Status.OK else []),
    ]


def _skew_check(skew: timedelta, round_trip: timedelta, max_skew: float) -> Check:
    seconds = skew.total_seconds()
    ahead = ("in step" if abs(seconds) < 0.001 else
             "the database is ahead" if seconds > 0 else "this host is ahead")
    detail = (f"{seconds:+.3f} s ({ahead}; measured within ±{round_trip.total_seconds() / 2:.3f}"
              f" s, limit {max_skew:g} s)")
    if abs(seconds) <= max_skew:
        return Check(name="clock_skew", status=Status.OK, detail=detail)
    return Check(name="clock_skew", status=Status.FAIL,
                 detail=f"{detail}: sync this host's clock (NTP); liveness and leases "
                 "compare times written by different hosts")
