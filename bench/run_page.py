"""14. The board's run page (`GET /runs/{id}`) of a run with 10,000 events (half of them
evidence items, half heartbeats with notes) against the same page of a run with 100, served
by `waypost serve` in the same rounds. The page shows the latest events and evidence items
(a "show earlier" link pages back), reading only those events from the store; what grows
with the history is the packet itself (its 5,000 evidence items are decoded and digested).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from bench import board_http, bundle
from bench.harness import Section, check, figures, interleave
from waypost.store import open_store

SMALL = 100
LIMIT = 6.0  # the page of a 100x longer history within 6x the time of the short one


def run(folder: Path, *, rounds: int, events: int = 10_000) -> Section:
    section = Section(key="run_page", title=f"14. Board: a run's page, {events:,} events",
                      unit="ms", higher_is_better=False)
    path = folder / "run-page.db"
    with open_store(str(path)) as store:
        long_run = bundle.fill(store, events=events, blob_mb=0)
        short_run = bundle.fill(store, events=SMALL, blob_mb=0)
    big, small = f"GET /runs/ID, {events:,} events", f"GET /runs/ID, {SMALL} events (baseline)"
    with board_http._serving(path) as (_, url, token), \
            httpx.Client(base_url=url, timeout=60,
                         headers={"Authorization": f"Bearer {token}"}) as client:
        samples = interleave({small: board_http._timed(client, f"/runs/{short_run}"),
                              big: board_http._timed(client, f"/runs/{long_run}")}, rounds + 1)
    section.figures = figures({name: values[1:] for name, values in samples.items()})
    grown = section.add_ratio(f"page at {events:,} events / page at {SMALL}", big, small)
    section.targets = [check(f"run page: {events:,} events <= {LIMIT:g}x {SMALL} events",
                             grown.median, LIMIT, at_least=False)]
    section.counts = {"events": events}
    section.notes.append(f"{rounds} interleaved rounds, one kept-alive connection, the owner's "
                         "token (who sees everything)")
    return section
