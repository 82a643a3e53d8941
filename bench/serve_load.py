"""11. `waypost serve` under 50 clients, with group commit and without; and memory.

One store holds 100,000 runs (filled as item 4 fills it) and 50 more, each held by its own
worker with that worker's token. Two `waypost serve` processes serve it, one as shipped
and one whose waypost.toml says `[store] group_commit = false`; in interleaved rounds, 50
clients (kept-alive connections of the bench's process, `bench.http_clients`) heartbeat
their runs through one server for a fixed window, and beside them one writer in the
bench's process heartbeats a run of its own through the library (`Run.heartbeat` in a
loop, on the same store). The figure is the aggregate rate of acknowledged (200)
heartbeats; every other answer is an error.

Beside them, a third server without grouping whose store never flushes (synchronous=OFF,
set by the bench in that process; waypost has no such setting): commits that cost nothing to
make durable, the most any grouping of commits could give this server.

Memory: each server's resident set (VmRSS, and its peak, VmHWM) once every round and then
the board's page (its largest answer) have been served; then `waypost watch --interval 1ms`
sweeps the same store 1,000 times, its RSS read after every 100th sweep: flat means the
1,000th within 5% of the 100th.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

from bench import board, http_api, http_clients, writers
from bench.board_http import rss_mb
from bench.harness import Figure, Section, check, interleave
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import tokens
from waypost.usecases.runs import Run

CLIENTS = 50
GROUPED = f"{CLIENTS} clients over HTTP, group commit"
UNGROUPED = f"{CLIENTS} clients over HTTP, no grouping ([store] group_commit = false)"
UNFLUSHED = f"{CLIENTS} clients over HTTP, no grouping, no flush (synchronous=OFF)"
ONE_WRITER = "1 writer in-process (Run.heartbeat in a loop)"
GAIN = "group commit / no grouping"
CEILING = "no flush / no grouping (the ceiling of any grouping)"
# every SQLite store this process opens leaves its commits unflushed: a measurement only
UNFLUSHED_STORES = (
    "from waypost.store.sqlite import setup as sqlite_setup\n"
    "opened = sqlite_setup.StoreFile.open\n"
    "def unflushed(self, *, create):\n"
    "    db = opened(self, create=create)\n"
    "    db.execute('PRAGMA synchronous = OFF')\n"
    "    return db\n"
    "sqlite_setup.StoreFile.open = unflushed\n")
UNFLUSHED_SERVE = (UNFLUSHED_STORES
                   + "from waypost.cli import console\nraise SystemExit(console())\n")
SWEEPS, FIRST = 1_000, 100  # watch sweeps; the one whose RSS is the reference
SERVER_MB = 150
GAIN_TARGET = (f"waypost serve, {CLIENTS} clients: group commit >= 1.5x the same server "
               "without it, zero errors")
SERVER_RSS_TARGET = (f"waypost serve RSS, {CLIENTS} clients, 100,000 runs stored: <= "
                     f"{SERVER_MB} MB (the peak of either server)")
WATCH_RSS_TARGET = (f"waypost watch RSS flat (+-5%) over {SWEEPS:,} sweeps (after sweep "
                    f"{SWEEPS:,} / after sweep {FIRST})")
TARGETS = (GAIN_TARGET, SERVER_RSS_TARGET, WATCH_RSS_TARGET)
WATCH_WAIT = 600.0  # seconds the 1,000 sweeps may take before the bench gives up


def _served_with(folder: Path, grouping: bool) -> Path:
    """A folder whose waypost.toml sets group commit on or off (a server started there)."""
    folder.mkdir()
    (folder / "waypost.toml").write_text(f"[store]\ngroup_commit = {str(grouping).lower()}\n")
    return folder


def _one_writer(path: Path, seconds: float, errors: Counter[str]) -> Callable[[], float]:
    [(run_id, actor, epoch)] = writers.claimed_runs(str(path), 1)
    store = SqliteStore(path)
    handle = Run(store, run_id, actor=actor, epoch=epoch)

    def window() -> float:
        done, began = 0, time.monotonic()
        until = began + seconds
        while time.monotonic() < until:
            try:
                handle.heartbeat(note="beat")
                done += 1
            except Exception as exc:  # counted: the target is zero
                errors[f"{ONE_WRITER}: {type(exc).__name__}: {exc}"[:160]] += 1
        return done / (time.monotonic() - began)

    return window


def _board_page(base: str, token: str) -> None:
    answer = httpx.get(f"{base}/", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    answer.raise_for_status()


def watch_rss(path: Path, sweeps: int = SWEEPS, every: int = FIRST) -> list[float]:
    """`waypost watch` sweeping the store every millisecond: its RSS (MiB) after sweep
    `every`, 2 x `every`, ... `sweeps` (one JSON report a sweep)."""
    proc = subprocess.Popen([sys.executable, "-m", "waypost", "watch", "--interval", "1ms",
                             "--json"], env={**os.environ, "WAYPOST_URL": str(path)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)
        lines.put("")  # it ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[float] = []
    deadline = time.monotonic() + WATCH_WAIT
    try:
        for sweep in range(1, sweeps + 1):
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if not line:
                raise RuntimeError("waypost watch stopped")
            if sweep % every == 0:
                seen.append(rss_mb(proc.pid))
    finally:
        proc.terminate()
        proc.wait(30)
        reader.join(30)
        proc.stdout.close()
    return seen


def run(folder: Path, *, rounds: int, seconds: float, stored: int,
        sweeps: int = SWEEPS) -> Section:
    section = Section(key="serve", title=f"11. waypost serve, {CLIENTS} clients heartbeating, "
                      f"{stored:,} runs stored: group commit, and memory", unit="ops/s",
                      higher_is_better=True)
    path = folder / "serve.db"
    board.check_copies(path, board.fill(path, stored))
    runs = http_api.worker_runs(str(path), CLIENTS)
    with SqliteStore(path) as store:
        owner, _ = tokens.issue(store, holder="owner", role="owner", run_id=None, ttl=None,
                                by="bench")
    errors: Counter[str] = Counter()
    alone = _one_writer(path, seconds, errors)
    with http_api.serving(str(path), _served_with(folder / "grouped", True)) as (g_pid, g_url), \
            http_api.serving(str(path), _served_with(folder / "ungrouped", False)) as (u_pid,
                                                                                      u_url), \
            http_api.serving(str(path), _served_with(folder / "unflushed", False),
                             ("-c", UNFLUSHED_SERVE)) as (_, n_url):
        samples = interleave({
            GROUPED: lambda: http_clients.window(g_url, runs, seconds, errors, GROUPED),
            UNGROUPED: lambda: http_clients.window(u_url, runs, seconds, errors, UNGROUPED),
            UNFLUSHED: lambda: http_clients.window(n_url, runs, seconds, errors, UNFLUSHED),
            ONE_WRITER: alone}, rounds + 1)
        samples = {name: values[1:] for name, values in samples.items()}  # warm-up dropped
        for base in (g_url, u_url):  # and the board's page, its largest answer
            _board_page(base, owner)
        memory = {name: (rss_mb(pid), rss_mb(pid, "VmHWM"))
                  for name, pid in (("group commit", g_pid), ("no grouping", u_pid))}
    swept = watch_rss(path, sweeps)
    section.figures = [Figure(name=n, samples=tuple(samples[n]),
                              note=f"errors: {writers.errors_of(n, errors)}")
                       for n in (GROUPED, UNGROUPED, UNFLUSHED, ONE_WRITER)]
    gain = section.add_ratio(GAIN, GROUPED, UNGROUPED)
    ceiling = section.add_ratio(CEILING, UNFLUSHED, UNGROUPED)
    section.add_ratio("group commit / 1 writer in-process", GROUPED, ONE_WRITER)
    section.add_ratio("no grouping / 1 writer in-process", UNGROUPED, ONE_WRITER)
    _memory(section, memory, swept, stored)
    total = sum(errors.values())
    section.counts = {"errors": total, "stored runs": stored + CLIENTS + 1, **section.counts}
    section.targets.insert(0, check(GAIN_TARGET, gain.median, 1.5, at_least=True,
                                    also=total == 0, detail=f"{total} errors; the ceiling, "
                                    f"no flush at all: {ceiling.median:.2f}x"))
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; each "
                         "server one uvicorn process whose thread pool runs the store's calls; "
                         "the clients, the servers and the in-process writer share the cores")
    section.notes.extend(f"error: {message} (x{n})" for message, n in errors.most_common(5))
    return section


def _memory(section: Section, memory: dict[str, tuple[float, float]], swept: list[float],
            stored: int) -> None:
    for name, (now, peak) in memory.items():
        section.counts[f"server RSS, MB, {name}, after the rounds"] = round(now)
        section.counts[f"server peak RSS, MB, {name}"] = round(peak)
    peak = max(high for _, high in memory.values())
    section.targets.append(check(SERVER_RSS_TARGET, peak, SERVER_MB, at_least=False,
                                 unit="MB", detail=f"{stored:,} runs stored"))
    first, last = swept[0], swept[-1]
    section.counts[f"watch RSS, MB, after sweep {FIRST}"] = round(first)
    section.counts[f"watch RSS, MB, after sweep {len(swept) * FIRST}"] = round(last)
    section.targets.append(check(WATCH_RSS_TARGET, last / first, 1.05, at_least=False,
                                 also=last / first >= 0.95,
                                 detail=f"{first:.1f} MB -> {last:.1f} MB"))
    section.notes.append(f"waypost watch RSS after every {FIRST} sweeps, MB: "
                         + ", ".join(f"{mb:.1f}" for mb in swept))
