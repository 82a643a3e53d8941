"""Deciding input before anything acts on it: names, text fields and numbers, each with one
rule that every edge (the CLI, the library, later the HTTP API and the MCP server) reuses.

A refusal is `InvalidInput` (exit 2) naming the field or flag, what was wrong and what is
accepted. Text limits are fixed here; a store may raise one for everyone who shares it
(`waypost limits`), which is read only when a value is over the fixed limit, so the hot
verbs pay nothing for it. The limits apply to what is written from now on: text stored
under older rules stays readable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from waypost.errors import InvalidInput

# The longest text each field takes, in characters; `waypost limits` lists them.
TEXT_LIMITS: Final[Mapping[str, int]] = {
    "title": 500,  # one line on a board
    "note": 4_000,  # a heartbeat's note: what the worker is doing now
    "detail": 4_000,  # a blocker's detail
    "resolution": 4_000,  # how a blocker was resolved
    "reason": 4_000,  # a skip, a cancel, a change request or a waiver
    "summary": 20_000,  # the result's private summary, or a hand-typed evidence summary
    "public_summary": 20_000,  # the result's public summary
    "actor": 200,  # --as, --owner, --worker, --to
    "idempotency_key": 200,
    "uri": 2_000,  # a target or notify URI
    "gate": 2_000,  # a gate's NAME=KIND:ARG
    "command": 16_000,  # the command line an evidence run records
}
# Characters that never belong in a name or a one-line field: controls and line breaks.
_CONTROLS: Final = frozenset(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0),
                                              0x2028, 0x2029))


def text(value: str, field: str, *, limit: int | None = None, required: bool = True) -> str:
    """`value` if it is within the field's limit (and not blank, when required)."""
    if required and not value.strip():
        raise InvalidInput(f"{field} must not be empty", hint=f"give a {field}")
    most = limit if limit is not None else TEXT_LIMITS[field]
    if len(value) > most:
        raise InvalidInput(
            f"{field} is {len(value)} characters, above the limit of {most}",
            hint=f"shorten it, or record the text as an artifact; the store's owner may raise "
                 f"the limit: waypost limits --set {field}=N")
    return value


def over_limit(value: str | None, field: str) -> bool:
    """Whether `value` is over the field's fixed limit (then a store override decides)."""
    return value is not None and len(value) > TEXT_LIMITS[field]


def name(value: str, field: str = "--as") -> str:
    """An actor's name (or any name that is recorded as who): not blank, no surrounding
    spaces, no control characters, at most 200 characters."""
    if not value.strip():
        raise InvalidInput(f"{field} must name someone, not be empty",
                           hint=f"e.g. {field} worker-1")
    if value != value.strip() or any(c in _CONTROLS for c in value):
        raise InvalidInput(f"{field} {value!r} has surrounding spaces or control characters",
                           hint=f"e.g. {field} {value.strip()[:40]!r}")
    return text(value, field, limit=TEXT_LIMITS["actor"])


def key(value: str, field: str = "--idempotency-key") -> str:
    """An idempotency key: a real key, never empty (an empty one would be shared by all)."""
    if not value.strip() or any(c in _CONTROLS for c in value):
        raise InvalidInput(f"{field} must be a non-empty key without control characters",
                           hint=f"e.g. {field} deploy-2026-12-02")
    return text(value, field, limit=TEXT_LIMITS["idempotency_key"])


def finite(value: float, field: str, *, low: float | None = None,
           high: float | None = None) -> float:
    """`value` if it is a finite number within [low, high]."""
    if not math.isfinite(value) or (low is not None and value < low) or (
            high is not None and value > high):
        raise InvalidInput(f"{field} must be a finite number{_range(low, high)}, not {value!r}")
    return value


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    if low is not None:
        return f" of at least {low:g}"
    return f" of at most {high:g}" if high is not None else ""


def fraction(text_: str) -> float:
    """A fraction done, 0 to 1 (what `--progress` takes); ValueError names what is wanted."""
    try:
        value = float(text_)
    except ValueError:
        raise ValueError(f"{text_!r} is not a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise ValueError(f"{text_!r} is not a number between 0 and 1")
    return value


LIMIT_MAX: Final = 10_000  # the most rows one listing returns


def row_limit(text_: str) -> int:
    """A listing's row count, 1 to LIMIT_MAX (what `--limit` takes)."""
    try:
        value = int(text_)
    except ValueError:
        raise ValueError(f"{text_!r} is not a whole number") from None
    if not 1 <= value <= LIMIT_MAX:
        raise ValueError(f"{text_} is not from 1 to {LIMIT_MAX}")
    return value


def utf8(values: list[str], what: str = "argument") -> None:
    """Refuse text that cannot be written as UTF-8: bytes that were not UTF-8 reach Python
    as lone surrogates, which every store and output would fail on later."""
    for i, value in enumerate(values, 1):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            shown = value.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise InvalidInput(f"{what} {i} ({shown[:60]}) is not valid UTF-8",
                               hint="pass text in UTF-8") from None
