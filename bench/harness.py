"""Measuring side by side: interleaved rounds, medians, paired ratios.

Every subject and its baselines are measured in the same process run, in alternating
rounds (the order rotates each round), so drift from other load on the machine hits all
of them alike. A ratio is the median of the per-round ratios: each round pairs a subject
sample with the baseline sample taken right beside it.
"""

from __future__ import annotations

import operator
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NOT_BUILT = "not built yet"
NOT_MEASURED = "not measured"


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One measured subject: its samples (one per round) in `unit`."""

    name: str
    samples: tuple[float, ...]
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "median": self.median, "min": self.low, "max": self.high,
                "samples": list(self.samples), "note": self.note}


@dataclass(frozen=True, kw_only=True)
class Ratio:
    """numerator ÷ denominator, round by round (both measured in the same rounds)."""

    label: str
    numerator: str
    denominator: str
    per_round: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    @property
    def low(self) -> float:
        return min(self.per_round)

    @property
    def high(self) -> float:
        return max(self.per_round)

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "numerator": self.numerator,
                "denominator": self.denominator, "median": self.median, "min": self.low,
                "max": self.high}


@dataclass(frozen=True, kw_only=True)
class Target:
    text: str
    value: float | None  # the measured ratio or time; None when not measured
    limit: float
    at_least: bool  # value must be >= limit (else <=)
    status: str  # PASS, MISS, NOT_BUILT or NOT_MEASURED
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.text, "value": self.value, "limit": self.limit,
                "at_least": self.at_least, "status": self.status, "detail": self.detail}


def check(text: str, value: float, limit: float, *, at_least: bool, unit: str = "x",
          also: bool = True, detail: str = "") -> Target:
    compare: Callable[[float, float], bool] = operator.ge if at_least else operator.le
    passed = compare(value, limit) and also
    shown = f"{value:.2f}{unit}" if unit == "x" else f"{value:.1f} {unit}"
    return Target(text=text, value=value, limit=limit, at_least=at_least,
                  status="PASS" if passed else "MISS",
                  detail=f"measured {shown}" + (f"; {detail}" if detail else ""))


def absent(text: str, status: str, detail: str = "") -> Target:
    return Target(text=text, value=None, limit=0.0, at_least=True, status=status, detail=detail)


@dataclass(kw_only=True)
class Section:
    """One numbered item of the benchmark: its figures, ratios and notes."""

    key: str
    title: str
    unit: str
    higher_is_better: bool
    figures: list[Figure] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # e.g. errors, stored runs
    targets: list[Target] = field(default_factory=list)  # checked by the section itself
    status: str | None = None  # NOT_BUILT when the feature does not exist yet

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)

    def ratio(self, label: str) -> Ratio:
        return next(r for r in self.ratios if r.label == label)

    def add_ratio(self, label: str, numerator: str, denominator: str) -> Ratio:
        top, bottom = self.figure(numerator).samples, self.figure(denominator).samples
        ratio = Ratio(label=label, numerator=numerator, denominator=denominator,
                      per_round=tuple(a / b for a, b in zip(top, bottom, strict=True)))
        self.ratios.append(ratio)
        return ratio

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "unit": self.unit,
                "higher_is_better": self.higher_is_better, "status": self.status,
                "figures": [f.as_dict() for f in self.figures],
                "ratios": [r.as_dict() for r in self.ratios], "counts": dict(self.counts),
                "notes": list(self.notes)}


def interleave(subjects: Mapping[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every subject once per round, rotating which goes first; samples by name."""
    names = list(subjects)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(subjects[name]())
    return samples


def figures(samples: Mapping[str, Sequence[float]],
            notes: Mapping[str, str] | None = None) -> list[Figure]:
    return [Figure(name=name, samples=tuple(values), note=(notes or {}).get(name, ""))
            for name, values in samples.items()]


def rate(operation: Callable[[], object], count: int) -> float:
    """Operations per second over `count` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(count):
        operation()
    return count / (time.perf_counter() - start)


def elapsed_ms(operation: Callable[[], object]) -> float:
    start = time.perf_counter()
    operation()
    return (time.perf_counter() - start) * 1000
