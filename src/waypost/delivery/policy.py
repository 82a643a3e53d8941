"""What an attempt came to, and when to try again: pure, so tests need no clock or network."""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from waypost.durations import format_duration


class Outcome(enum.StrEnum):
    SENT = "sent"  # the target accepted it: done
    RETRY = "retry"  # it may work later: try again after a backoff
    GIVE_UP = "give_up"  # it will not work by retrying (e.g. 410 Gone, 404): fail for good


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """What one send did, as a target reports it."""

    outcome: Outcome
    detail: str  # the receipt when sent, else the error
    retry_after: float | None = None  # seconds the target asked us to wait (Retry-After)


def sent(detail: str) -> Attempt:
    return Attempt(outcome=Outcome.SENT, detail=detail)


def retry(detail: str, retry_after: float | None = None) -> Attempt:
    return Attempt(outcome=Outcome.RETRY, detail=detail, retry_after=retry_after)


def give_up(detail: str) -> Attempt:
    return Attempt(outcome=Outcome.GIVE_UP, detail=detail)


def for_status(status: int, reason: str, retry_after: float | None = None) -> Attempt:
    """Standard Webhooks status handling: 2xx sent; 408/429, 3xx and 5xx retried; 410 Gone
    and every other 4xx fail for good (the receiver said no; asking again will not help)."""
    said = f"HTTP {status} {reason}".rstrip()
    if 200 <= status < 300:
        return sent(said)
    if status == 410:
        return give_up(f"{said}: the receiver asked not to be sent this again")
    if 400 <= status < 500 and status not in (408, 429):
        return give_up(said)
    return retry(said, retry_after)


def backoff(attempts: int, *, base: float, cap: float,
            rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after the `attempts`-th failure: base · 2^(attempts-1), at most `cap`,
    of which a random half is jitter (so relays that failed together spread out)."""
    ceiling = min(cap, base * 2.0 ** min(max(attempts - 1, 0), 60))
    return ceiling / 2 + ceiling / 2 * rand()


def next_try(attempt: Attempt, *, attempts: int, now: datetime, queued_at: datetime,
             base: float, cap: float, horizon: float,
             rand: Callable[[], float] = random.random) -> datetime | None:
    """When to try again after a failed `attempt`, or None: fail for good now."""
    if attempt.outcome is not Outcome.RETRY:
        return None
    wait = max(backoff(attempts, base=base, cap=cap, rand=rand),
               min(attempt.retry_after or 0.0, cap))
    at = now + timedelta(seconds=wait)
    if at > queued_at + timedelta(seconds=horizon):
        return None
    return at


def exhausted(error: str, attempts: int, horizon: float) -> str:
    plural = "s" if attempts != 1 else ""
    return (f"{error} (gave up after {attempts} attempt{plural}: the {format_duration(horizon)}"
            " retry horizon is exhausted)")
