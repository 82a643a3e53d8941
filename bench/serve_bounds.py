"""12. What `waypost serve`'s read deadlines and connection limit cost: 50 clients
heartbeat through `waypost serve` as shipped (uvicorn's h11 protocol held to a deadline on
each request's head and body and to `--max-connections`), beside the same server on the
same store whose protocol is uvicorn's own h11 protocol, unbounded (set by the bench in
that process: waypost has no such setting). The figure is the aggregate rate of
acknowledged (200) heartbeats over kept-alive connections (`bench.http_clients`); the
ratio is what the bounds cost per request: a timer armed and cancelled twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench import http_api, http_clients, writers
from bench.harness import Figure, Section, interleave

CLIENTS = 50
BOUNDED = f"{CLIENTS} clients, waypost serve as shipped (bounded reads)"
UNBOUNDED = f"{CLIENTS} clients, the same with uvicorn's own h11 protocol"
RATIO = "bounded / unbounded"
UNBOUNDED_SERVE = ("import uvicorn.protocols.http.h11_impl as h11_impl\n"
                   "import waypost.system.deadlines as deadlines\n"
                   "deadlines.protocol = lambda limits: h11_impl.H11Protocol\n"
                   "from waypost.cli import console\nraise SystemExit(console())\n")


def run(folder: Path, *, rounds: int, seconds: float) -> Section:
    section = Section(key="bounds", title="12. waypost serve's read deadlines: heartbeats "
                      "through the bounded protocol, beside uvicorn's own", unit="ops/s",
                      higher_is_better=True)
    path = str(folder / "bounds.db")
    runs = http_api.worker_runs(path, CLIENTS)
    errors: Counter[str] = Counter()
    with http_api.serving(path) as (_, b_url), \
            http_api.serving(path, launch=("-c", UNBOUNDED_SERVE)) as (_, u_url):
        samples = interleave({
            BOUNDED: lambda: http_clients.window(b_url, runs, seconds, errors, BOUNDED),
            UNBOUNDED: lambda: http_clients.window(u_url, runs, seconds, errors, UNBOUNDED)},
            rounds + 1)
    samples = {name: values[1:] for name, values in samples.items()}  # warm-up dropped
    section.figures = [Figure(name=n, samples=tuple(samples[n]),
                              note=f"errors: {writers.errors_of(n, errors)}")
                       for n in (BOUNDED, UNBOUNDED)]
    section.add_ratio(RATIO, BOUNDED, UNBOUNDED)
    section.counts = {"errors": sum(errors.values())}
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds after "
                         "one discarded warm-up round; both servers serve one store, in turn")
    section.notes.extend(f"error: {message} (x{n})" for message, n in errors.most_common(5))
    return section
