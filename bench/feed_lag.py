"""How late the board's live feed (`GET /events`) tells of a change on a PostgreSQL store
while another session on the same server holds a transaction open.

`python -m bench.feed_lag [--hold 60] [--where other-db|same-db|none]`: a store in a
private schema on the bench's server (`WAYPOST_BENCH_POSTGRES_URL`, as bench item 6),
`waypost serve` on it in a process of its own, a board stream open on it; then another
session takes a transaction id and keeps its transaction open for `--hold` seconds (in the
server's `postgres` database, in the store's own database from a session that never
touches waypost's tables, or not at all), a run starts, and the time until the stream
names the run is printed, beside how long the other transaction was still open then.
"""

from __future__ import annotations

import argparse
import json
import secrets
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

from bench import http_api
from bench.postgres import drop_schemas, in_schema, server_url
from waypost.store import open_store
from waypost.usecases import starting, tokens


def _database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _hold(where: str, seconds: float, holding: threading.Event, done: threading.Event) -> None:
    """A transaction that took an id and stays open for `seconds`, elsewhere on the server."""
    url = _database(server_url(), "postgres") if where == "other-db" else server_url()
    with psycopg.connect(url, autocommit=False) as conn:
        conn.execute("SELECT pg_current_xact_id()")
        holding.set()
        done.wait(seconds)
        conn.rollback()


def measure(hold: float, where: str) -> dict[str, float | str]:
    schema = f"feedlag_{secrets.token_hex(6)}"
    url = in_schema(schema)
    holding, done = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(where, hold, holding, done), daemon=True)
    try:
        with open_store(url) as store:
            secret, _ = tokens.issue(store, holder="bench", role="viewer", run_id=None,
                                     ttl=None, by="bench")
            with http_api.serving(url) as (_, base):
                if where != "none":
                    holder.start()
                    holding.wait(30)
                began_hold = time.monotonic()
                timeout = httpx.Timeout(hold * 2 + 30, connect=10)
                with httpx.stream("GET", f"{base}/events", timeout=timeout,
                                  headers={"Authorization": f"Bearer {secret}"}) as answer:
                    answer.raise_for_status()
                    lines = answer.iter_lines()
                    next(lines)  # the stream is open
                    run, _ = starting.start(store, "a change", actor="bench", target="none:")
                    changed = time.monotonic()
                    for line in lines:
                        if line.startswith("data: {") and run.id in {
                                r["id"] for r in json.loads(line[6:])["runs"]}:
                            break
                    seen = time.monotonic()
        left = max(0.0, hold - (changed - began_hold)) if where != "none" else 0.0
        return {"where": where, "hold_s": hold, "lag_s": round(seen - changed, 2),
                "other_transaction_still_open_for_s": round(left, 2)}
    finally:
        done.set()
        if holder.is_alive():
            holder.join(30)
        drop_schemas(schema)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hold", type=float, default=60.0)
    parser.add_argument("--where", choices=("other-db", "same-db", "none"), default="other-db")
    args = parser.parse_args()
    print(json.dumps(measure(args.hold, args.where)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
