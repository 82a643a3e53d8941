"""What an attempt came to, and when to try again: pure, so tests need no clock or network.

The one classifier of delivery errors. Every target reports its failures through the
`for_…` functions below, so one table decides what is retried:

    permanent (the run is blocked at once, `delivery_failed`, naming the cause)
        HTTP 4xx except 408, 425, 429; 301 and 308 (moved for good: record the new URL)
        a target URI that is malformed or names an unsupported scheme
        a file: path outside the delivery root or the allow-list (symlinks resolved),
            or one the relay may not write: EACCES, EPERM, EROFS, ENOTDIR, EISDIR, EEXIST,
            ELOOP, ENAMETOOLONG, EINVAL
        exec: command not found (or exit 127), not executable (or exit 126), ENOEXEC,
            E2BIG; exit 64 (usage), 65 (data error), 77 (no permission), 78 (config error):
            the sysexits a retry cannot fix, for a sender that wants to say "stop"
        a credential that is not set (SLACK_BOT_TOKEN, GITHUB_TOKEN, WAYPOST_SMTP_URL …),
            or one the service refused (Slack invalid_auth, GitHub 401, SMTP 535)
        Slack: an `ok: false` answer naming an error a retry cannot fix (channel_not_found,
            not_in_channel, is_archived, missing_scope, …: `SLACK_PERMANENT`)
        GitHub: 404 (the repository, or the token cannot see it), 401, 403 that is not
            rate limiting, 422
        SMTP: a 5xx reply (a refused address, sender or message)
    transient (backed off, retried until the horizon; then blocked, saying so)
        HTTP 5xx, 408, 425, 429, other 3xx, anything else unexpected
        timeouts, connection and TLS errors, a relay without its webhook secret
        (a timeout or a lost connection after the request went out is also marked
        `outcome_unknown`: the receiver may have it, which a retarget must respect)
        ENOSPC, EDQUOT, EIO, EAGAIN, EBUSY, and any other OS error
        Slack: ratelimited (HTTP 429, waiting its Retry-After), internal_error and every
            error not known to be permanent; GitHub: 403 or 429 with x-ratelimit-remaining
            0 (waiting until x-ratelimit-reset) or retry-after; SMTP: a 4xx reply
        exec: every other non-zero exit (75, EX_TEMPFAIL, included), death by a signal
        a target's own bug (an exception the relay did not expect)

A transient error that lasts is still bounded by the horizon; a permanent one is not
retried, because the same request would be refused the same way for three days.
"""

from __future__ import annotations

import enum
import errno
import random
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from waypost.durations import format_duration
from waypost.model import DeliveryAssurance


class Outcome(enum.StrEnum):
    SENT = "sent"  # the target accepted it: done
    RETRY = "retry"  # it may work later: try again after a backoff
    GIVE_UP = "give_up"  # it will not work by retrying (e.g. 410 Gone, 404): fail for good


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """What one send did, as a target reports it."""

    outcome: Outcome
    detail: str  # the receipt when sent, else the error
    retry_after: float | None = None  # seconds the target asked us to wait (Retry-After)
    # the request went out but no answer came back (a timeout or a dropped connection
    # after sending; an exec: command cut off at its timeout): the receiver may already
    # have it, so moving it to another target could deliver it twice. A file: never is.
    outcome_unknown: bool = False
    assurance: DeliveryAssurance | None = None  # when sent: how strong "once" was
    refs: dict[str, str] = {}  # when sent: what a later delivery may build on (a Slack ts)


def sent(detail: str, assurance: DeliveryAssurance | None = None,
         refs: dict[str, str] | None = None) -> Attempt:
    return Attempt(outcome=Outcome.SENT, detail=detail, assurance=assurance,
                   refs=refs or {})


def keyed(attempt: Attempt) -> Attempt:
    """`attempt`, which carried the delivery's stable key to the receiver, as `keyed` if sent."""
    if attempt.outcome is not Outcome.SENT:
        return attempt
    return msgspec.structs.replace(attempt, assurance=DeliveryAssurance.KEYED)


def retry(detail: str, retry_after: float | None = None, *,
          outcome_unknown: bool = False) -> Attempt:
    return Attempt(outcome=Outcome.RETRY, detail=detail, retry_after=retry_after,
                   outcome_unknown=outcome_unknown)


def give_up(detail: str) -> Attempt:
    return Attempt(outcome=Outcome.GIVE_UP, detail=detail)


def for_status(status: int, reason: str, retry_after: float | None = None) -> Attempt:
    """An HTTP answer: 2xx sent; 408, 425, 429, 5xx and other 3xx retried; 301, 308 and
    every other 4xx (410 Gone among them) permanent: the receiver said no."""
    said = f"HTTP {status} {reason}".rstrip()
    if 200 <= status < 300:
        return sent(said)
    if status == 410:
        return give_up(f"{said}: the receiver asked not to be sent this again")
    if status in (301, 308):
        return give_up(f"{said}: the receiver moved for good; record its new URL as the "
                       "target")
    if 400 <= status < 500 and status not in (408, 425, 429):
        return give_up(said)
    return retry(said, retry_after)


PERMANENT_ERRNOS = frozenset({
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
    errno.ELOOP, errno.ENAMETOOLONG, errno.EINVAL, errno.ENOEXEC, errno.E2BIG,
})
PERMANENT_EXITS = {126: "not executable", 127: "command not found", 64: "usage error",
                   65: "data error", 77: "permission denied", 78: "configuration error"}


def for_os_error(exc: OSError, what: str) -> Attempt:
    """A failed write or spawn: `what` was being done (e.g. "cannot write /x/result.md")."""
    said = f"{what}: {exc.strerror or exc}"
    if exc.errno in PERMANENT_ERRNOS:
        return give_up(said)
    return retry(said)


def for_exit(code: int, said: str) -> Attempt:
    """An exec: target's exit status (negative: killed by that signal)."""
    if code == 0:
        return sent(f"exec: exit 0{said}")
    if code in PERMANENT_EXITS:
        return give_up(f"exec: exit {code} ({PERMANENT_EXITS[code]}){said}")
    if code < 0:
        return retry(f"exec: killed by signal {-code}{said}")
    return retry(f"exec: exit {code}{said}")


def for_timeout(what: str, seconds: float) -> Attempt:
    """A send cut off at its timeout after it started: it may have done its work."""
    return retry(f"{what} did not finish within {seconds:g}s (it may have delivered: "
                 "outcome unknown)", outcome_unknown=True)


def unusable(detail: str) -> Attempt:
    """A target that can never be sent to as recorded (malformed, unsupported, outside)."""
    return give_up(detail)


def missing_credential(reason: str) -> Attempt:
    """A credential the target needs is not set: retrying will not set it."""
    return give_up(reason)


SLACK_PERMANENT = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "channel_is_archived",
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
    "no_permission", "missing_scope", "not_allowed_token_type", "restricted_action",
    "msg_too_long", "no_text", "invalid_arguments", "invalid_metadata_format",
    "invalid_metadata_schema", "metadata_too_large", "cant_update_message",
    "edit_window_closed", "team_access_not_granted", "ekm_access_denied",
    "invalid_blocks", "too_many_attachments",
})
SLACK_BAD_TOKEN = frozenset({"invalid_auth", "not_authed", "account_inactive",
                             "token_revoked", "token_expired", "not_allowed_token_type"})


def for_slack(method: str, error: str, retry_after: float | None = None) -> Attempt:
    """An `ok: false` answer of a Slack Web API method (or HTTP 429: `ratelimited`)."""
    said = f"Slack {method}: {error}"
    if error in SLACK_BAD_TOKEN:
        return give_up(f"{said}: Slack refused the bot token (SLACK_BOT_TOKEN)")
    if error == "missing_scope":
        return give_up(f"{said}: the bot token lacks a scope (chat:write, and "
                       "channels:history or groups:history for the duplicate check)")
    if error in SLACK_PERMANENT:
        return give_up(said)
    return retry(said, retry_after)


def for_github(status: int, reason: str, *, remaining: str | None, reset: str | None,
               retry_after: float | None, now: datetime) -> Attempt:
    """A GitHub REST answer: rate limiting (403 or 429 with x-ratelimit-remaining 0 or
    retry-after) waits; 401, 404 and other 4xx are permanent; the rest as `for_status`."""
    said = f"GitHub HTTP {status} {reason}".rstrip()
    if status in (403, 429) and (remaining == "0" or retry_after is not None):
        wait = retry_after
        if wait is None and reset is not None and reset.strip().isdigit():
            wait = max(0.0, int(reset) - now.timestamp())
        return retry(f"{said}: rate limited", wait)
    if status == 401:
        return give_up(f"{said}: GitHub refused the token (GITHUB_TOKEN)")
    if status == 404:
        return give_up(f"{said}: repository not found, or the token cannot see it")
    if status == 403:
        return give_up(f"{said}: the token may not do this (it needs write access to "
                       "issues and pull requests, or to commit statuses)")
    attempt = for_status(status, reason)
    return msgspec.structs.replace(attempt, detail=f"GitHub {attempt.detail}")


def for_smtp(code: int, message: str, what: str) -> Attempt:
    """An SMTP reply that refused `what`: 5xx permanent (535: the login), 4xx transient."""
    said = f"SMTP {code} {message}".rstrip()
    if code in {535, 530}:
        return give_up(f"{what}: {said}: the SMTP server refused the login in "
                       "WAYPOST_SMTP_URL")
    if 500 <= code < 600:
        return give_up(f"{what}: {said}")
    return retry(f"{what}: {said}")


def unexpected(exc: Exception) -> Attempt:
    """A target's own bug: retried (a fixed relay may deliver), and shown as it is."""
    return retry(f"{type(exc).__name__}: {exc}")


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
