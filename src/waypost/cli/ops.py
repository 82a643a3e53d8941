"""Operator verbs: `waypost migrate` brings a store's schema up to date now; `waypost doctor`
checks what a store needs to be trusted: that it answers, its schema version (and whether
this waypost may write to it), what its backend checks of itself (`Store.diagnose`:
durability settings, the file's integrity and the disk's free space on SQLite, the clock
skew between this host and the database on PostgreSQL, where hosts compare times written
by one another), that every run's packet reads, and that every run's history verifies
(bounded by `--history-limit`, with progress on stderr).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

import click

from waypost.cli import steps
from waypost.cli.context import Ctx, duration, verb
from waypost.config import unreadable
from waypost.durations import utcnow
from waypost.errors import InvalidInput, NotFound, WaypostError
from waypost.model import TERMINAL, State
from waypost.store import POSTGRES_SCHEMES, Store, open_postgres, sqlite_path
from waypost.store.records import Diagnosis, SchemaState, Status

DEFAULT_MAX_SKEW = 2.0  # seconds: liveness and leases compare times written on other hosts
DEFAULT_HISTORY_LIMIT = 100_000  # runs whose chains doctor verifies: its bound on a large store
PROGRESS_EVERY = 1000  # runs verified between two progress lines on stderr


# --- migrate ----------------------------------------------------------------------------


@click.command()
@verb
def migrate(ctx: Ctx) -> None:
    """Create or upgrade the store's schema now (every verb also does it when it opens the
    store; run this once before upgrading many hosts)."""
    state = ctx.store.schema_state()
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
@click.option("--history-limit", type=click.IntRange(min=0), default=DEFAULT_HISTORY_LIMIT,
              show_default=True, metavar="N",
              help="Verify the hash chains of at most this many runs (the newest first).")
@verb
def doctor(ctx: Ctx, max_skew: str, history_limit: int) -> None:
    """Check the store: connection, schema version, durability, file integrity and free
    space (SQLite), clock skew (PostgreSQL), every run's packet and history (as `waypost
    verify`). Exits 1 when a check fails, 2 when the store URL cannot be used here
    (malformed, or its driver not installed). Never creates a store, nor migrates a
    PostgreSQL schema."""
    url, checks, unusable = diagnose(ctx, duration(max_skew, "--max-skew") or 0.0,
                                     history_limit)
    failed = [c.name for c in checks if c.status is Status.FAIL]
    summary = f"{len(failed)} check(s) failed: {', '.join(failed)}" if failed else "all good"
    ctx.emit({"store": url, "ok": not failed, "checks": checks},
             "\n".join([f"waypost doctor: {url}", *map(_row, checks), summary]))
    if failed:
        raise click.exceptions.Exit(2 if unusable else 1)


def _row(check: Diagnosis) -> str:
    return f"  {check.status.value:<5} {check.name:<14} {check.detail}"


def diagnose(ctx: Ctx, max_skew: float, history_limit: int = DEFAULT_HISTORY_LIMIT,
             ) -> tuple[str, list[Diagnosis], bool]:
    """(the store as shown, the checks, whether the URL is unusable here): stops after a
    failed connection."""
    postgres = bool(ctx.store_url and ctx.store_url.startswith(POSTGRES_SCHEMES))
    try:
        store, elapsed_ms = _open_as_found(ctx, postgres)
    except WaypostError as exc:
        hint = steps.hint(exc)
        detail = f"{exc.message} (next: {hint})" if hint else exc.message
        return (ctx.store_url or "(default: .waypost/ found upward)",
                [Diagnosis(name="connect", status=Status.FAIL, detail=detail)],
                isinstance(exc, InvalidInput))
    with store if postgres else contextlib.nullcontext():
        connect, *settings = store.diagnose(opened_ms=elapsed_ms, max_skew=max_skew)
        schema = _schema_check(store.schema_state())
        rest = ([_guarded("runs", store.rows_diagnosis),
                 _guarded("history", lambda: history_check(store, history_limit)),
                 _guarded("watchers", lambda:
                 _watchers_check(store)), _guarded("credentials", lambda:
                 _credentials_check(store))] if schema.status is Status.OK else [])
        return store.url, [connect, schema, *settings, *rest], False


def history_check(store: Store, limit: int) -> Diagnosis:
    """Every run's hash chain and fold, as `waypost verify` recomputes them, newest runs
    first and at most `limit` of them (one run's events in memory at a time), with a line
    of progress on stderr every `PROGRESS_EVERY` runs. A broken chain fails the check
    naming the runs, whatever the file's own check found."""
    from waypost.core.history import verify_run

    ids = store.run_ids()
    checked = ids[::-1][:limit]
    broken: list[str] = []
    for done, run_id in enumerate(checked, start=1):
        try:
            verify_run(run_id, store.events(run_id), store.get(run_id))
        except WaypostError as exc:  # a run that does not read is as broken to its readers
            broken.append(exc.message)
        if done % PROGRESS_EVERY == 0 and done < len(checked):
            click.echo(f"waypost doctor: verified {done} of {len(checked)} run(s)", err=True)
    scope = (f"{len(checked)} run(s)" if len(checked) == len(ids) else
             f"the newest {len(checked)} of {len(ids)} run(s) (--history-limit)")
    if not broken:
        return Diagnosis(name="history", status=Status.OK if len(checked) == len(ids)
                         else Status.WARN, detail=f"{scope}: every hash chain verifies")
    more = f"; and {len(broken) - 5} more" if len(broken) > 5 else ""
    return Diagnosis(name="history", status=Status.FAIL,
                     detail=f"{len(broken)} of {scope} do not verify: {'; '.join(broken[:5])}"
                     f"{more}; writes to such a run are refused: restore the store from a "
                     "backup (waypost verify RUN shows one)")


def _guarded(name: str, check: Callable[[], Diagnosis]) -> Diagnosis:
    """A check's finding, or its failure (a damaged store fails reads) as one."""
    try:
        return check()
    except WaypostError as exc:
        return Diagnosis(name=name, status=Status.FAIL, detail=exc.message)


def _open_as_found(ctx: Ctx, postgres: bool) -> tuple[Store, float]:
    """The store and how long opening it took, creating nothing and migrating no
    PostgreSQL schema."""
    if postgres:  # load the driver first: "opened in" times the connection, not the import
        with contextlib.suppress(ImportError):
            import waypost.store.postgres.store  # noqa: F401
    began = time.perf_counter()
    if postgres and ctx.store_url:
        store: Store = open_postgres(ctx.store_url, migrate_schema=False)
    elif ctx.store_url and not _exists(sqlite_path(ctx.store_url)):
        raise NotFound(f"no SQLite store at {sqlite_path(ctx.store_url)}",
                       hint=f"create it with: waypost init --store {ctx.store_url}")
    else:
        store = ctx.store
    return store, (time.perf_counter() - began) * 1000


def _exists(path: str) -> bool:
    """Whether anything is at `path` (opening it says what is wrong with it); a path this
    user may not look through is NotFound naming it."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except PermissionError as exc:
        raise unreadable(path) from exc
    except OSError:
        return True
    return True


def _credentials_check(store: Store) -> Diagnosis:
    """Whether the relay here has every credential the open runs' targets need (a Slack
    token, a GitHub token, an SMTP server and sender): a missing one blocks a run's
    delivery with its name, so doctor says it first."""
    from waypost.delivery.settings import load_settings, missing_credential

    settings = load_settings()
    open_runs = store.list_runs(states=[s for s in State if s not in TERMINAL])
    missing: dict[str, list[str]] = {}
    for packet in open_runs:
        for uri in (packet.target, packet.notify):
            why = missing_credential(uri, settings) if uri else None
            if why:
                missing.setdefault(why, []).append(packet.id)
    if not missing:
        return Diagnosis(name="credentials", status=Status.OK,
                         detail="every open run's target has the credentials it needs here")
    said = "; ".join(f"{why}: needed by {len(set(ids))} open run(s), e.g. {ids[0]}"
                     for why, ids in sorted(missing.items()))
    return Diagnosis(name="credentials", status=Status.WARN,
                     detail=f"{said} (a relay here would block them with delivery_failed)")


def _schema_check(state: SchemaState) -> Diagnosis:
    if state.version == state.latest:
        return Diagnosis(name="schema", status=Status.OK,
                         detail=f"version {state.version} (latest)")
    if state.version > state.latest:
        newer = f"version {state.version} is newer than this waypost knows ({state.latest})"
        if state.min_writer is not None and state.min_writer <= state.latest:
            return Diagnosis(name="schema", status=Status.WARN,
                             detail=f"{newer}; it still takes this waypost's writes (it "
                             f"needs writers of schema {state.min_writer} or newer): upgrade "
                             "waypost on this host")
        return Diagnosis(name="schema", status=Status.FAIL,
                         detail=f"{newer}, and it takes writes only from a waypost that knows"
                         f" schema {state.min_writer or state.version} or newer: this host "
                         "may read it, not write to it; upgrade waypost on this host")
    return Diagnosis(name="schema", status=Status.FAIL,
                     detail=f"version {state.version}, but this waypost needs {state.latest}: "
                     "run waypost migrate")


def _watchers_check(store: Store) -> Diagnosis:
    """The live watchers and their roles: what covers the runs (never a failure)."""
    live = [f"{w.id} {w.role.value} ({f'runs of {w.owner}' if w.owner else 'every run'})"
            for w in store.watchers(now=utcnow())]
    detail = (", ".join(live) if live else
              "none running: nobody notices a silent worker (start one: waypost watch)")
    return Diagnosis(name="watchers", status=Status.OK, detail=detail)
