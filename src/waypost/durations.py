"""Durations (`90s`, `5m`, `2h`, `1h30m`, `90d`), deadlines (`+4h` or ISO 8601), run ids."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from waypost.errors import InvalidInput

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)"  # compiled on first use (re's cache): few commands parse
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"

Clock = Callable[[], datetime]  # what every loop and use case takes as `clock=` (tests inject one)


MAX_DURATION = 3653 * 86400.0  # ten years: longer is a typo, and would overflow a date


def parse_duration(value: str | float, flag: str = "duration", *,
                   positive: bool = False) -> float:
    """Seconds in `value`: text (`90s`, `1h30m`; a bare number is seconds) or a number of
    seconds as typed (a JSON body, a tool's argument, the library), under one rule in the
    same words: finite, at most ten years, and above zero when `positive`. A refusal
    names `flag`."""
    seconds = _text_seconds(value, flag) if isinstance(value, str) else value
    if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
            or not (seconds > 0 if positive else seconds >= 0) or seconds > MAX_DURATION):
        least = "above 0" if positive else "at least 0"
        raise InvalidInput(f"{flag}: duration {value!r} must be {least} and at most 3653d "
                           "(ten years)", hint=DURATION_HINT)
    return seconds


DURATION_HINT = "write e.g. 90s, 5m, 2h, 1h30m or 7d"


def _text_seconds(text: str, flag: str) -> float:
    value = text.strip().lower()
    if not value.isascii():  # digits of other scripts: the number rules take ASCII alone
        raise InvalidInput(f"{flag}: bad duration {text!r}", hint=DURATION_HINT)
    try:
        return float(value)
    except ValueError:
        parts = re.findall(_PART, value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InvalidInput(f"{flag}: bad duration {text!r}", hint=DURATION_HINT) from None
        return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_deadline(text: str, now: datetime, flag: str = "--deadline") -> datetime:
    """`+4h` (from now) or an ISO 8601 time (UTC when no offset is given), within ten years
    either side of now."""
    if text.startswith("+"):
        return now + timedelta(seconds=parse_duration(text[1:], flag))
    try:
        moment = datetime.fromisoformat(text)
    except (ValueError, OverflowError):
        raise InvalidInput(f"{flag}: bad deadline {text!r}", hint=DEADLINE_HINT) from None
    return within_ten_years(moment, now, flag, shown=text)


DEADLINE_HINT = "write +4h or an ISO time like 2026-12-01T17:00Z"


def within_ten_years(moment: datetime, now: datetime, flag: str = "--deadline", *,
                     shown: str | None = None) -> datetime:
    """`moment` in UTC (a naive one is taken as UTC) if it is within ten years of now; a
    refusal names `flag` and shows `shown` (the text as typed) or the moment."""
    try:
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        away = abs((moment - now).total_seconds())
    except (ValueError, OverflowError):
        away = math.inf
    if away > MAX_DURATION:
        raise InvalidInput(f"{flag}: deadline {shown or moment.isoformat()!r} is more than "
                           "ten years away", hint=DEADLINE_HINT)
    return moment


def format_duration(seconds: float) -> str:
    """`45s`, `1m30s`, `2h05m`, `3d04h`: two units at most, the smaller one cut, never
    rounded up (a 90 s lease is `1m30s`, not `2m`); `parse_duration` reads it back."""
    whole = int(abs(seconds))
    for big, small, unit, sub in ((86400, 3600, "d", "h"), (3600, 60, "h", "m"),
                                  (60, 1, "m", "s")):
        if whole >= big:
            count, rest = divmod(whole, big)
            return f"{count}{unit}{rest // small:02d}{sub}" if rest // small else f"{count}{unit}"
    return f"{whole}s"


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_run_id(now: datetime, randbytes: Callable[[int], bytes] = os.urandom) -> str:
    """`wp_` + 26 Crockford base32 chars: 48-bit milliseconds then 80 random bits (sortable)."""
    value = (int(now.timestamp() * 1000) << 80) | int.from_bytes(randbytes(10), "big")
    chars = [_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5)]
    return "wp_" + "".join(chars)
