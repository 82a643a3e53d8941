"""`python -m bench [--quick] [--only KEY ...]`: run the benchmarks, print the table, write
the same as JSON (bench/results/latest.json unless --out says otherwise)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import (
    board,
    board_http,
    bundle,
    cli_verbs,
    durable,
    http_api,
    pending,
    report,
    run_page,
    scan,
    serve_bounds,
    serve_load,
    threads,
    waiters,
    writers,
)
from bench.harness import Section

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True, kw_only=True)
class Budget:
    durable_rounds: int
    durable_batch: int
    cli_rounds: int
    writer_rounds: int
    writer_seconds: float
    board_runs: int
    board_rounds: int
    sweep_rounds: int
    sweep_stored: int
    pg_rounds: int
    pg_seconds: float
    delivery_rounds: int
    delivery_batch: int
    scan_rounds: int
    bundle_rounds: int
    bundle_events: int
    bundle_mb: int


QUICK = Budget(durable_rounds=31, durable_batch=30, cli_rounds=10, writer_rounds=2,
               writer_seconds=1.0, board_runs=20_000, board_rounds=5, sweep_rounds=2,
               sweep_stored=50_000, pg_rounds=2, pg_seconds=0.5, delivery_rounds=3,
               delivery_batch=10, scan_rounds=3, bundle_rounds=2, bundle_events=2_000,
               bundle_mb=10)
FULL = Budget(durable_rounds=101, durable_batch=40, cli_rounds=30, writer_rounds=9,
              writer_seconds=1.5, board_runs=100_000, board_rounds=15, sweep_rounds=3,
              sweep_stored=1_000_000, pg_rounds=5, pg_seconds=2.0, delivery_rounds=5,
              delivery_batch=40, scan_rounds=7, bundle_rounds=3, bundle_events=10_000,
              bundle_mb=100)

Step = Callable[[Path, Budget], Section]
STEPS: dict[str, Step] = {
    "durable": lambda d, b: durable.run(d, rounds=b.durable_rounds, batch=b.durable_batch),
    "cli": lambda d, b: cli_verbs.run(d, rounds=b.cli_rounds),
    "writers": lambda d, b: writers.run(d, rounds=b.writer_rounds, seconds=b.writer_seconds),
    "threads": lambda d, b: threads.run(d, rounds=b.writer_rounds,
                                        seconds=b.writer_seconds),
    "board": lambda d, b: board.run(d, rounds=b.board_rounds, stored=b.board_runs),
    "boardhttp": lambda d, b: board_http.run(d, rounds=b.board_rounds, stored=b.board_runs),
    "sweep": lambda d, b: pending.sweep(d, rounds=b.sweep_rounds, stored=b.sweep_stored),
    "postgres": lambda d, b: pending.postgres(d, rounds=b.pg_rounds, seconds=b.pg_seconds),
    "delivery": lambda d, b: pending.delivery(d, rounds=b.delivery_rounds,
                                              batch=b.delivery_batch),
    "scan": lambda d, b: scan.run(d, rounds=b.scan_rounds),
    "http": lambda d, b: http_api.run(d, rounds=b.writer_rounds, seconds=b.writer_seconds),
    "serve": lambda d, b: serve_load.run(d, rounds=b.writer_rounds, seconds=b.writer_seconds,
                                         stored=b.board_runs),
    "bounds": lambda d, b: serve_bounds.run(d, rounds=b.writer_rounds,
                                            seconds=b.writer_seconds),
    "waiters": lambda d, b: waiters.run(d, rounds=b.writer_rounds, seconds=b.writer_seconds),
    "runpage": lambda d, b: run_page.run(d, rounds=b.board_rounds, events=b.bundle_events),
    "bundle": lambda d, b: bundle.run(d, rounds=b.bundle_rounds, events=b.bundle_events,
                                      blob_mb=b.bundle_mb),
}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="A smaller run (under a minute).")
    parser.add_argument("--only", action="append", choices=sorted(STEPS), metavar="KEY",
                        help=f"Run only these items (repeat): {', '.join(STEPS)}.")
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json",
                        help="Where the JSON goes [default: bench/results/latest.json].")
    parser.add_argument("--dir", type=Path, default=None,
                        help="Scratch directory for the stores [default: a new one in "
                        "bench/results/, on the project's disk, removed afterwards].")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    budget = QUICK if args.quick else FULL
    RESULTS.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="work-", dir=args.dir or RESULTS))
    began, sections = time.perf_counter(), []
    try:
        for key in args.only or list(STEPS):
            print(f"… {key}", file=sys.stderr, flush=True)
            folder = scratch / key
            folder.mkdir()
            sections.append(STEPS[key](folder, budget))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    found = report.targets({s.key: s for s in sections})
    meta = _meta(args.quick, budget, time.perf_counter() - began)
    print(report.table(sections, found, _header(meta)), end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report.document(sections, found, meta), indent=2) + "\n")
    print(f"\nwritten: {args.out}")
    return 0


def _meta(quick: bool, budget: Budget, seconds: float) -> dict[str, object]:
    return {"mode": "quick" if quick else "full", "at": datetime.now(UTC).isoformat(),
            "seconds": round(seconds, 1), "python": platform.python_version(),
            "cpus": os.cpu_count(), "platform": platform.platform(), "commit": _commit(),
            "budget": asdict(budget)}


def _header(meta: dict[str, object]) -> str:
    return (f"waypost benchmarks ({meta['mode']}, {meta['seconds']} s): Python "
            f"{meta['python']}, {meta['cpus']} CPUs, commit {meta['commit']}; every figure "
            "beside its baselines, measured in the same interleaved rounds")


def _commit() -> str:
    """The commit measured, marked `+changes` when tracked files differ from it."""
    here = Path(__file__).parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False, cwd=here)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], capture_output=True,
                               check=False, cwd=here).returncode == 1
    except OSError:
        return "unknown"
    return (out.stdout.strip() or "unknown") + ("+changes" if dirty else "")
