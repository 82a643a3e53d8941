"""8. The sanitizer on hostile text: `waypost scan`'s rules and the `no-private` gate over
adversarial input at 10 KB, 100 KB and 1 MB, in µs per KB.

The text repeats, block after block, the inputs that once made the sanitizer's patterns
backtrack (`a_`, `a.`, `1.`, `%`, `eyJa.`, `sk-`, `password=x `, `=>`, `github_pat_`, …),
each block as long as the others. Linear patterns cost the same per KB at every size, so the
three figures of a subject stay level; a pattern that backtracks makes the 1 MB figure grow
with the size (the ratio "1 MB / 10 KB" would be near 100x for a quadratic one).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import waypost
from bench.harness import Section, check, figures, interleave
from waypost.config import Config
from waypost.core.sanitize import find
from waypost.usecases import checks

SIZES = (10_000, 100_000, 1_000_000)
# Inputs that were superlinear before the rules were made linear, and their neighbours.
UNITS = ("a_", "a.", "1.", "a-", "%", "eyJa.", "sk-", "xoxb-", "10.", "ghp_", "github_pat_",
         "password=x ", "=>", ":=\"", "a@" + "b.aws", "C:\\Users\\", "/home/", "aws key=",
         "-----END ", "Bearer ", "u:p@", "://", "token: word ")
SCAN, GATE = "scan", "no-private gate"
RATIO = "largest / smallest size"
LIMIT = 3.0  # linear: level; quadratic: ~ largest/smallest size


def adversarial(size: int) -> str:
    """`size` characters: one block of each unit, repeated, blocks of equal length."""
    block = max(1, size // len(UNITS))
    text = "".join((unit * (block // len(unit) + 1))[:block] + "\n" for unit in UNITS)
    return (text * (size // len(text) + 1))[:size]


def label(subject: str, size: int) -> str:
    shown = f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1_000} KB"
    return f"{subject}, {shown} of adversarial text"


def _per_kb(operation: Callable[[], object], size: int) -> float:
    start = time.perf_counter()
    operation()
    return (time.perf_counter() - start) * 1e6 / (size / 1000)


def _gate(folder: Path, texts: dict[int, str]) -> dict[int, tuple[checks.Check,
                                                                  checks.Context]]:
    """One run holding each text as an artifact; the `no-private` check of each."""
    store = waypost.open_store(str(folder / "scan.db"))
    run, _ = waypost.start(store, "Sanitizer bench", actor="owner", owner="owner")
    worker = waypost.Run(store, run.id, actor="worker")
    worker.claim()
    for size, text in texts.items():
        (folder / f"adversarial-{size}.txt").write_text(text)
        worker.add_artifact(str(folder / f"adversarial-{size}.txt"),
                            role=waypost.ArtifactRole.REPORT, max_bytes=4 * size + 1024)
    packet = store.get(run.id)
    return {size: (checks.parse_check(f"no-private:adversarial-{size}.txt"),
                   checks.Context(store=store, packet=packet, config=Config()))
            for size in texts}


def run(folder: Path, *, rounds: int, sizes: tuple[int, ...] = SIZES) -> Section:
    texts = {size: adversarial(size) for size in sizes}
    gates = _gate(folder, texts)
    subjects: dict[str, Callable[[], float]] = {}
    for size, text in texts.items():
        subjects[label(SCAN, size)] = functools.partial(
            _per_kb, functools.partial(find, text), size)
        subjects[label(GATE, size)] = functools.partial(
            _per_kb, functools.partial(checks.run_check, *gates[size]), size)
    section = Section(key="scan", title="8. Sanitizer on adversarial text (scan, no-private)",
                      unit="µs/KB", higher_is_better=False,
                      figures=figures(interleave(subjects, rounds)))
    small, large = min(sizes), max(sizes)
    for subject in (SCAN, GATE):
        ratio = section.add_ratio(f"{subject}: {RATIO}", label(subject, large),
                                  label(subject, small))
        section.targets.append(check(f"{subject}: linear (µs/KB at {large:,} chars <= "
                                     f"{LIMIT:.0f}x at {small:,})", ratio.median, LIMIT,
                                     at_least=False))
    gate = checks.run_check(*gates[large])  # what the gate measured said, to show it ran
    section.notes.append(f"{len(UNITS)} adversarial units in equal blocks; the gate on "
                         f"{large:,} chars: {gate.verdict}, {gate.summary[:80]}")
    return section
