"""`waypost hook EVENT --host HOST`: an agent host's hook, its JSON on stdin, the answer on
stdout in the host's own format. Today: Claude Code's `Stop`.

Claude Code (its hooks documentation): a Stop hook gets `session_id`, `transcript_path`,
`cwd`, `permission_mode`, `hook_event_name`, `stop_hook_active` and
`last_assistant_message`; it answers exit 0 with `{"decision": "block", "reason": …}` to
make the agent go on (the reason is its next instruction), or exit 0 with no decision to
let it stop. Any exit code but 0 and 2 lets the agent stop anyway (fails open), so every
failure of the hook's own (bad JSON, a store that cannot be opened or is busy past the
wait) is answered as a block whose reason says what broke.

Run on every stop, so it stays a hot verb: no click, no HTTP, MCP or PostgreSQL stack
unless the store is one, and a bounded wait for a busy store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Final

import msgspec

from waypost import hooks
from waypost.cli.context import Ctx, echo
from waypost.errors import InvalidInput, WaypostError
from waypost.model import BlockerKind, Packet

HOSTS: Final = ("claude",)
EVENTS: Final = ("stop",)
MAX_INPUT: Final = 1 << 20  # bytes of hook JSON read at most (a host sends a few hundred)
INPUT_WAIT: Final = 5.0  # seconds the host's JSON may take to arrive in whole
HOOK_WAIT: Final = "5s"  # a busy store is waited for this long, unless WAYPOST_BUSY_TIMEOUT


class ClaudeStop(msgspec.Struct, frozen=True, kw_only=True):
    """What Claude Code sends a Stop hook (fields it may add later are ignored)."""

    session_id: str
    hook_event_name: str
    transcript_path: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    stop_hook_active: bool = False
    last_assistant_message: str | None = None


def answer(ctx: Ctx, event: str, host: str, cap: int) -> None:
    """Decide, and print the host's answer; never raises (a failure is a block)."""
    try:
        decision = _decide(ctx, event, host, cap)
    except WaypostError as exc:
        hint = f" (next: {exc.hint})" if exc.hint else ""
        decision = hooks.StopDecision(block=True, reason=f"waypost hook failed: {exc}{hint}")
    except Exception as exc:  # a bug must not let the agent stop unchecked
        decision = hooks.StopDecision(
            block=True, reason=f"waypost hook failed unexpectedly: {type(exc).__name__}: {exc}")
    _print_claude(decision)


def _decide(ctx: Ctx, event: str, host: str, cap: int) -> hooks.StopDecision:
    if host not in HOSTS or event not in EVENTS:
        raise InvalidInput(f"waypost hook knows {', '.join(EVENTS)} for "
                           f"{', '.join(HOSTS)}, not {event} for {host}",
                           hint="waypost hook stop --host claude")
    stop = read_claude_stop(read_input())
    if ctx.store_url is None and _no_default_store():
        return hooks.decide_stop(None, stop.session_id)
    with bounded_wait():
        return _decide_with_store(ctx, stop.session_id, cap)


def read_input(limit: int = MAX_INPUT, wait_s: float = INPUT_WAIT) -> bytes:
    """Standard input to its end: `limit` + 1 bytes at most (more is refused by the caller),
    and given up on when it stays open and silent for `wait_s`."""
    import select
    import time

    fd = sys.stdin.fileno()
    chunks: list[bytes] = []
    size, deadline = 0, time.monotonic() + wait_s
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise InvalidInput(f"the hook's input did not end within {wait_s:g} s")
        chunk = os.read(fd, min(1 << 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_claude_stop(data: bytes) -> ClaudeStop:
    if len(data) > MAX_INPUT:
        raise InvalidInput(f"the hook's input is over {MAX_INPUT} bytes")
    try:
        stop = msgspec.json.decode(data, type=ClaudeStop)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the hook's input is not Claude Code's Stop JSON: {exc}") from exc
    if stop.hook_event_name != "Stop":
        raise InvalidInput(f"waypost hook stop got a {stop.hook_event_name[:40]!r} event",
                           hint="register it under Stop: waypost hooks install --host claude")
    if not stop.session_id.strip() or len(stop.session_id) > 200:
        raise InvalidInput("the hook's input has no usable session_id")
    return stop


def _decide_with_store(ctx: Ctx, session: str, cap: int) -> hooks.StopDecision:
    store = ctx.store
    run_id = store.session_run(session)
    packet = store.get(run_id) if run_id else None
    decision = hooks.decide_stop(packet, session)
    if packet is None:
        return decision
    if not decision.block:
        store.count_stop_block(packet.id, reset=True)
        return decision
    if hooks.cap_blocker_open(packet):  # the hook gave up on this session already
        return hooks.StopDecision(block=False, reason=decision.reason)
    blocks = store.count_stop_block(packet.id)
    if blocks <= cap:
        return decision
    return _give_up(ctx, packet, decision, blocks - 1)


def _give_up(ctx: Ctx, packet: Packet, decision: hooks.StopDecision,
             blocks: int) -> hooks.StopDecision:
    """Past the cap: a named blocker on the run, and the agent may stop, saying so. The
    blocker is written as the lease holder (the session's worker), else as the owner."""
    from waypost.runs import Run

    lease = packet.worker
    actor, epoch = (lease.actor, lease.epoch) if lease else (packet.owner, None)
    ctx.store.count_stop_block(packet.id, reset=True)
    _, blocker = Run(ctx.store, packet.id, actor=actor, epoch=epoch).block(
        BlockerKind.OTHER, hooks.cap_detail(decision, blocks))
    return hooks.StopDecision(block=False, reason=(
        f"waypost: the agent was refused a stop {blocks} times in a row; recorded blocker "
        f"{blocker} on run {packet.id} and let it stop. Resolve it when the work goes on: "
        f"waypost unblock {packet.id} {blocker} --resolution TEXT"))


def _no_default_store() -> bool:
    from waypost.store import find_default

    return find_default() is None


@contextlib.contextmanager
def bounded_wait() -> Iterator[None]:
    """Wait for a busy store `HOOK_WAIT` at most (unless WAYPOST_BUSY_TIMEOUT says), well
    below a host's hook timeout (Claude Code's: 60 s)."""
    from waypost.store.limits import BUSY_TIMEOUT_ENV

    if os.environ.get(BUSY_TIMEOUT_ENV):
        yield
        return
    os.environ[BUSY_TIMEOUT_ENV] = HOOK_WAIT
    try:
        yield
    finally:
        os.environ.pop(BUSY_TIMEOUT_ENV, None)


def _print_claude(decision: hooks.StopDecision) -> None:
    """Claude Code's answer: a block decision on stdout, or nothing (the agent may stop;
    the reason goes to stderr, for the host's debug log)."""
    if decision.block:
        echo(msgspec.json.encode({"decision": "block", "reason": decision.reason}).decode())
    else:
        echo(decision.reason, err=True)

