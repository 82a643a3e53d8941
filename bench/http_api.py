"""9. The HTTP API: heartbeats through `waypost serve` beside the same work in-process.

16 clients (threads of the bench's process, each with its own connection, run and worker
token) heartbeat their runs through one `waypost serve` process on a SQLite store for a
fixed window; beside them, in the same interleaved rounds, 16 writer processes heartbeat
their runs through the library on another store (item 3's pool). The figure is the
aggregate rate of acknowledged (2xx) or committed heartbeats; every other answer is an error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

import waypost
from bench import writers
from bench.harness import Figure, Section, interleave

CLIENTS = 16
HTTP = f"{CLIENTS} clients over HTTP (waypost serve)"
LIBRARY = f"{CLIENTS} writer processes in-process"


def worker_runs(url: str, count: int = CLIENTS) -> list[tuple[str, str]]:
    """`count` runs, each held by its own worker, with that worker's token."""
    from waypost.usecases import tokens

    made = []
    with waypost.open_store(url) as store:
        for number in range(count):
            run, _ = waypost.start(store, f"http {number}", actor="owner", owner="owner",
                                   target="none:", worker=f"worker-{number}")
            secret, _ = tokens.issue(store, holder=f"worker-{number}", role="worker",
                                     run_id=run.id, ttl=None, by="bench")
            made.append((run.id, secret))
    return made


def window(base: str, runs: list[tuple[str, str]], seconds: float, errors: Counter[str],
           label: str = HTTP) -> float:
    """Each run's worker heartbeats it over its own connection for `seconds`; the aggregate
    rate of 200 answers (any other answer, or a failed request, is an error of `label`)."""
    counts = [0] * len(runs)
    until = time.monotonic() + seconds

    def client(index: int, run: str, token: str) -> None:
        with httpx.Client(base_url=base, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < until:
                try:
                    answer = http.post(f"/api/runs/{run}/heartbeat",
                                       json={"note": "beat", "epoch": 1})
                except httpx.HTTPError as exc:
                    errors[f"{label}: {type(exc).__name__}: {exc}"[:160]] += 1
                    continue
                if answer.status_code == 200:
                    counts[index] += 1
                else:
                    errors[f"{label}: {answer.status_code}"] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(n, run, token))
               for n, (run, token) in enumerate(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


@contextmanager
def serving(url: str, cwd: Path | None = None,
            launch: Sequence[str] = ("-m", "waypost")) -> Iterator[tuple[int, str]]:
    """`waypost serve` on the store at `url`, in a process of its own started in `cwd`
    (where its waypost.toml is found) by `python <launch> serve`; its pid and base URL."""
    proc = subprocess.Popen([sys.executable, *launch, "serve", "--port", "0"],
                            env={**os.environ, "WAYPOST_URL": url}, stderr=subprocess.PIPE,
                            text=True, cwd=cwd)
    assert proc.stderr is not None
    said = proc.stderr
    # what it says after where it listens is read as it comes: a full pipe stops a server
    drain = threading.Thread(target=lambda: [None for _ in said], daemon=True)
    try:
        found = re.search(r"http://127\.0\.0\.1:\d+", said.readline())
        assert found, "waypost serve did not say where it listens"
        drain.start()
        yield proc.pid, found.group(0)
    finally:
        proc.terminate()
        proc.wait(30)
        if drain.is_alive():
            drain.join(30)
        said.close()


def run(folder: Path, *, rounds: int, seconds: float) -> Section:
    section = Section(key="http", title="9. HTTP API: heartbeats through waypost serve, "
                      "beside the library", unit="ops/s", higher_is_better=True)
    http_url, library_url = str(folder / "http.db"), str(folder / "library.db")
    runs = worker_runs(http_url)
    pool = writers.Pool(library_url, writers.claimed_runs(library_url, CLIENTS), "waypost")
    errors: Counter[str] = Counter()
    try:
        with serving(http_url) as (_, base):
            samples = interleave({
                HTTP: lambda: window(base, runs, seconds, errors),
                LIBRARY: lambda: pool.window(CLIENTS, seconds, LIBRARY)}, rounds)
    finally:
        pool.close()
    errors.update(pool.errors)
    section.figures = [Figure(name=label, samples=tuple(samples[label]),
                              note=f"errors: {writers.errors_of(label, errors)}")
                       for label in (HTTP, LIBRARY)]
    section.add_ratio("HTTP / in-process", HTTP, LIBRARY)
    section.counts = {"errors": sum(errors.values())}
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; one "
                         "uvicorn process (its thread pool runs the store's calls); every "
                         "request authenticates its token and answers the packet with its "
                         "observed view")
    section.notes.extend(f"error: {message} (x{n})" for message, n in errors.most_common(5))
    return section
