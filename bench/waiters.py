"""Waiters: what a thousand `waypost wait`s on one store cost the writers.

Four writer processes heartbeat their own runs as fast as they can for a fixed window (the
pool of item 3); in alternate rounds, this process holds 1,000 threads in
`waypost.wait(...)` meanwhile, each on a run of its own that nothing moves (so every one of
them waits the whole window), all sharing the process's one follower of the change cursor;
after the window the runs are cancelled, which wakes every waiter.
The figure is the writers' aggregate rate with and without the waiters, measured in the
same interleaved rounds; the target: with them, at least 0.9x the rate without (waiters
cost the writers less than 10%). `--postgres` (or `python -m bench.waiters --postgres`)
runs the same on the bench's PostgreSQL server, where the follower also LISTENs.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from pathlib import Path

import waypost
from bench.harness import Section, check, figures, interleave
from bench.writers import Pool, claimed_runs
from waypost.usecases import waiting

WAITERS = 1000
WRITERS = 4
TARGET = "1,000 waiters (threads, one follower) cost 4 writers < 10%: ratio >= 0.90x"
RATIO = "with 1,000 waiters / without"


def _idle_runs(url: str, count: int) -> list[str]:
    """Runs that nothing will move while the bench runs: every waiter waits the whole
    window."""
    with waypost.open_store(url) as store:
        return [waypost.start(store, f"waited {n}", actor="owner", owner="owner",
                              target="none:")[0].id for n in range(count)]


class Waiters:
    """1,000 threads in `waypost.wait`, on one store (one follower), for one window: each on
    a fresh run that nothing moves during the window; cancelled after it, which is what
    wakes every waiter (outside the window)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.store = waypost.open_store(url)
        self.follower = waiting.follower_of(self.store)
        self.woken = 0

    def around(self, window: float, measure: Callable[[], float]) -> float:
        runs = _idle_runs(self.url, WAITERS)
        done: list[waiting.Waited] = []
        threads = [threading.Thread(target=lambda r=run: done.append(
            waiting.wait(self.store, r, timeout=window + 120)), daemon=True) for run in runs]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while self.follower.waiting() < len(runs):  # every one registered first
            assert time.monotonic() < deadline, "the waiters did not start"
            time.sleep(0.05)
        try:
            return measure()
        finally:
            for run in runs:
                waypost.Run(self.store, run, actor="owner").cancel("the window ended")
            for thread in threads:
                thread.join(window + 150)
            self.woken += sum(1 for w in done if w.outcome == "reached")

    def close(self) -> None:
        self.store.close()


def run(folder: Path, *, rounds: int, seconds: float, url: str | None = None) -> Section:
    where = "PostgreSQL" if url else "SQLite"
    section = Section(key="waiters", title=f"Waiters: 1,000 `wait`s on one {where} store "
                      f"beside {WRITERS} writer processes  [writers' aggregate heartbeats]",
                      unit="ops/s", higher_is_better=True)
    url = url or str(folder / "waiters.db")
    pool = Pool(url, claimed_runs(url, WRITERS), "waypost")
    waiters = Waiters(url)
    scans_before = waiters.follower.scans
    try:
        def alone() -> float:
            return pool.window(WRITERS, seconds, "alone")

        def beside() -> float:
            return waiters.around(seconds, lambda: pool.window(WRITERS, seconds, "waited"))

        samples = interleave({"4 writers, nobody waiting": alone,
                              "4 writers, 1,000 waiters": beside}, rounds)
    finally:
        waiters.close()
        pool.close()
    section.figures = figures(samples)
    ratio = section.add_ratio(RATIO, "4 writers, 1,000 waiters", "4 writers, nobody waiting")
    section.targets.append(check(TARGET, ratio.median, 0.9, at_least=True))
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; "
                         f"the follower made {waiters.follower.scans - scans_before} change "
                         f"scans in all (polling every {waiting.POLL_S:g} s)")
    section.notes.append(f"{waiters.woken} waits woken by the cancellation after the windows")
    section.notes.extend(f"error: {m} (x{n})" for m, n in pool.errors.most_common(5))
    return section


def main() -> int:
    import tempfile

    from bench import report

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    schema = None
    url = None
    if args.postgres:
        import secrets

        from bench.postgres import in_schema

        schema = f"waiters_{secrets.token_hex(6)}"
        url = in_schema(schema)
    try:
        with tempfile.TemporaryDirectory() as folder:
            section = run(Path(folder), rounds=args.rounds, seconds=args.seconds, url=url)
    finally:
        if schema is not None:
            from bench.postgres import drop_schemas

            drop_schemas(schema)
    print(report.table([section], section.targets, "waypost bench: waiters"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
