"""6. PostgreSQL: durable transitions (heartbeats through the library) by 1 and 8 client
processes, beside a raw psycopg transaction (insert a 1 KB event row, upsert a 2 KB packet
row, both jsonb) by 1 and 8 processes, on the same server, in alternating rounds.

Everything lives in two private schemas made for the run and dropped afterwards. The
server is `WAYPOST_BENCH_POSTGRES_URL`, else `postgresql://postgres@127.0.0.1:5432/test`.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Callable
from urllib.parse import quote

from bench import pending, writers
from bench.harness import Section, check, interleave

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
CLIENTS = (1, 8)
NOUN = "client"


def server_url() -> str:
    return os.environ.get("WAYPOST_BENCH_POSTGRES_URL") or DEFAULT_URL


def unreachable() -> str | None:
    """Why PostgreSQL cannot be measured here, or None."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        with psycopg.connect(server_url(), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL unreachable at {server_url()}: {str(exc).strip()}"


def _with(url: str, **params: str) -> str:
    query = "&".join(f"{k}={quote(v)}" for k, v in params.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


def in_schema(schema: str) -> str:
    """The store URL of a private schema on the bench's server."""
    return _with(server_url(), schema=schema)


def drop_schemas(*schemas: str) -> None:
    _execute(*(f"DROP SCHEMA IF EXISTS {schema} CASCADE" for schema in schemas))


def _execute(*statements: str) -> None:
    import psycopg

    with psycopg.connect(server_url(), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


def run(*, rounds: int, seconds: float) -> Section:
    section = Section(key="postgres", title=pending.PG_TITLE, unit="ops/s",
                      higher_is_better=True)
    schema = f"waypost_bench_{os.getpid()}_{secrets.token_hex(3)}"
    raw_schema = f"{schema}_raw"
    _execute(f"CREATE SCHEMA {raw_schema}",
             f"CREATE TABLE {raw_schema}.events (run_id text NOT NULL, seq bigint NOT NULL,"
             " body jsonb NOT NULL, PRIMARY KEY (run_id, seq))",
             f"CREATE TABLE {raw_schema}.packets (id text PRIMARY KEY, version bigint NOT NULL,"
             " body jsonb NOT NULL)")
    pools: list[writers.Pool] = []
    try:
        store_url = in_schema(schema)
        raw_url = _with(server_url(), options=f"-c search_path={raw_schema}")
        pools.append(writers.Pool(store_url, writers.claimed_runs(store_url, max(CLIENTS)),
                                  "waypost"))
        pools.append(writers.Pool(raw_url, [(f"run-{n}", "", 0) for n in range(max(CLIENTS))],
                                  "raw-pg"))
        samples = _interleaved(pools, rounds, seconds)
    finally:
        for pool in pools:
            pool.close()
        drop_schemas(schema, raw_schema)
    errors = pools[0].errors + pools[1].errors
    section.figures = [writers.with_errors(name, values, errors)
                       for name, values in samples.items()]
    ours = section.add_ratio(f"waypost: {writers.ratio_label(8, NOUN)}", _label("waypost", 8),
                             _label("waypost", 1))
    raw = section.add_ratio(f"raw psycopg: {writers.ratio_label(8, NOUN)}", _label("raw", 8),
                            _label("raw", 1))
    section.add_ratio(f"waypost / raw psycopg, {writers.name(1, NOUN)}", _label("waypost", 1),
                      _label("raw", 1))
    section.add_ratio(f"waypost / raw psycopg, {writers.name(8, NOUN)}", _label("waypost", 8),
                      _label("raw", 8))
    failed = sum(errors.values())
    share = ours.median / raw.median if raw.median else 0.0
    section.targets = [check(pending.PG_TARGET, share, 0.9, at_least=True,
                             also=failed == 0,
                             detail=f"{ours.median:.2f}x against raw psycopg's "
                             f"{raw.median:.2f}x on the same server and cores; {failed} errors")]
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; each "
                         "client heartbeats its own run; the server shares the 2 cores")
    section.notes.extend(f"error: {message} (x{n})" for message, n in errors.most_common(5))
    return section


def _label(kind: str, count: int) -> str:
    what = ("waypost Run.heartbeat()" if kind == "waypost"
            else "raw psycopg insert+upsert (one statement)")
    return f"{what}, {writers.name(count, NOUN)}"


def _interleaved(pools: list[writers.Pool], rounds: int,
                 seconds: float) -> dict[str, list[float]]:
    subjects: dict[str, Callable[[], float]] = {}
    for kind, pool in zip(("waypost", "raw"), pools, strict=True):
        for count in CLIENTS:
            label = _label(kind, count)
            subjects[label] = functools.partial(pool.window, count, seconds, label)
    return interleave(subjects, rounds)
