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
import re
from collections.abc import Mapping
from typing import Final

from waypost.errors import InvalidInput, TooDeep

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


def finite(value: str | float, field: str, *, low: float | None = None,
           high: float | None = None, hint: str = "") -> float:
    """`value` if it is a finite number within [low, high]. Text (what a flag takes) and a
    typed value (a JSON body, a tool's argument, the library) meet one rule in the same
    words; NaN, infinities, booleans and text that is not a number are refused."""
    number = _float(value) if isinstance(value, str) else value
    if (isinstance(number, bool) or not isinstance(number, int | float)
            or not math.isfinite(number) or (low is not None and number < low)
            or (high is not None and number > high)):
        raise InvalidInput(f"{field} must be a finite number{_range(low, high)}, "
                           f"not {_shown(value)}", hint=hint)
    return number


def whole(value: str | int, field: str, *, low: int, high: int, hint: str = "") -> int:
    """`value` if it is a whole number within [low, high]: text of ASCII digits (what a
    flag takes) or a typed int, in the same words."""
    number = _int(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise InvalidInput(f"{field} must be a whole number from {low} to {high}, "
                           f"not {_shown(value)}", hint=hint)
    return number


def _float(text_: str) -> float:
    try:
        return float(text_) if text_.isascii() else math.nan
    except ValueError:
        return math.nan


def _int(text_: str) -> int | None:
    digits = text_.strip()
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) < 40 else None


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" between {low:g} and {high:g}"
    if low is not None:
        return f" of at least {low:g}"
    return f" of at most {high:g}" if high is not None else ""


def fraction(value: str | float, field: str = "progress") -> float:
    """A fraction done, 0 to 1 (`--progress`, a heartbeat's `progress`)."""
    return finite(value, field, low=0.0, high=1.0)


EPOCH_MAX: Final = 2**62  # the largest lease epoch: far past any run's, within every store


def epoch(value: str | int, field: str = "epoch") -> int:
    """A lease epoch as `claim` returned it: a whole number from 1."""
    return whole(value, field, low=1, high=EPOCH_MAX)


LIMIT_MAX: Final = 10_000  # the most rows one listing returns


def row_limit(value: str | int, field: str = "--limit") -> int:
    """A listing's row count, 1 to LIMIT_MAX (what `--limit` takes)."""
    return whole(value, field, low=1, high=LIMIT_MAX)


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


MAX_NESTING: Final = 64  # JSON arrays and objects inside each other: no request needs 5
_STRINGS: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: fast
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def nesting(data: bytes, what: str = "the JSON body", limit: int = MAX_NESTING) -> None:
    """Refuse (TooDeep) JSON nested deeper than `limit`, decided on its bytes in one pass
    without recursion, before any decoder recurses into it (a decoder's own depth is the
    interpreter's stack: a body 1,000 levels deep exhausted it)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # the common case: too few brackets to be too deep
    depth = 0
    for byte in _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > limit:
            raise TooDeep(f"{what} is nested deeper than {limit} arrays and objects; "
                          "nothing was done", hint=f"send JSON at most {limit} levels deep")
