"""Durations (`90s`, `5m`, `2h`, `1h30m`, `90d`), deadlines (`+4h` or ISO 8601), run ids."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from waypost.errors import InvalidInput

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"

Clock = Callable[[], datetime]  # what every loop and use case takes as `clock=` (tests inject one)


def parse_duration(text: str) -> float:
    """Seconds in `text`; a bare number is seconds."""
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        parts = _PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InvalidInput(
                f"bad duration {text!r}", hint="write e.g. 90s, 5m, 2h, 1h30m or 7d"
            ) from None
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds < 0:
        raise InvalidInput(f"duration {text!r} is negative")
    return seconds


def parse_deadline(text: str, now: datetime) -> datetime:
    """`+4h` (from now) or an ISO 8601 time (UTC when no offset is given)."""
    if text.startswith("+"):
        return now + timedelta(seconds=parse_duration(text[1:]))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"bad deadline {text!r}", hint="write +4h or an ISO time like 2026-12-01T17:00Z"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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
