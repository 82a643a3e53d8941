"""10. The board over HTTP: its active-runs page (`GET /`) through `waypost serve`, with
100,000 runs stored against the same page with 1,000 stored; beside it, in the same
rounds, the API's bare listing of the same active runs (`GET /api/runs`, one page of 100),
and the server's memory (RSS) once every round has been served.

The stores are filled as item 4 fills them (templates copied under new run ids, every
chain re-verified on a sample). Each figure is one request's time through a kept-alive
connection, as a browser sends it; the server runs in its own process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench import board, http_api
from bench.harness import Section, check, figures, interleave
from waypost.store import open_store
from waypost.usecases import tokens

PAGE = "GET / (the board's page)"
LISTING = "GET /api/runs (bare listing)"


@contextmanager
def _serving(path: Path) -> Iterator[tuple[int, str, str]]:
    """`waypost serve` on the store: its pid, base URL and an owner token."""
    with open_store(str(path)) as store:
        secret, _ = tokens.issue(store, holder="owner", role="owner", run_id=None, ttl=None,
                                 by="bench")
    with http_api.serving(str(path)) as (pid, url):
        yield pid, url, secret


def _timed(client: httpx.Client, path: str) -> Callable[[], float]:
    def once() -> float:
        began = time.perf_counter()
        answer = client.get(path)
        answer.raise_for_status()
        return (time.perf_counter() - began) * 1000

    return once


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (VmRSS), or at its peak (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        found = re.search(rf"{field}:\s+(\d+) kB", status.read())
    return int(found.group(1)) / 1024 if found else float("nan")


def run(folder: Path, *, rounds: int, stored: int, small: int = 1_000) -> Section:
    section = Section(key="board_http", title=f"10. Board over HTTP: the active-runs page, "
                      f"{stored:,} runs stored", unit="ms", higher_is_better=False)
    big_path, small_path = folder / "board-http-big.db", folder / "board-http-small.db"
    board.check_copies(big_path, board.fill(big_path, stored))
    board.check_copies(small_path, board.fill(small_path, small))
    big_page, small_page = f"{PAGE}, {stored:,} stored", f"{PAGE}, {small:,} stored"
    big_list = f"{LISTING}, {stored:,} stored"
    with _serving(big_path) as (big_pid, big_url, big_token), \
            _serving(small_path) as (_, small_url, small_token), \
            httpx.Client(base_url=big_url, timeout=60,
                         headers={"Authorization": f"Bearer {big_token}"}) as big, \
            httpx.Client(base_url=small_url, timeout=60,
                         headers={"Authorization": f"Bearer {small_token}"}) as little:
        samples = interleave({
            small_page: _timed(little, "/"),
            big_page: _timed(big, "/"),
            big_list: _timed(big, "/api/runs?limit=100"),
        }, rounds + 1)
        rss = rss_mb(big_pid)
    section.figures = figures({name: values[1:] for name, values in samples.items()})
    grown = section.add_ratio(f"page at {stored:,} / page at {small:,}", big_page, small_page)
    section.add_ratio("page / bare listing", big_page, big_list)
    section.targets = [check(f"board's page over HTTP: {stored:,} stored <= 1.2x {small:,} stored",
                             grown.median, 1.2, at_least=False)]
    section.counts = {"stored runs": stored, "active runs": board.active_runs(stored),
                      "server RSS, MB, after the rounds": round(rss)}
    section.notes.append(f"the page shows one page (200) of the {stored:,} runs, the most "
                         "recently started, every state, under the token holder's "
                         "'needs you' (its inbox: it owns every run, none acknowledged); "
                         f"{rounds} interleaved rounds, one kept-alive connection per server")
    return section
