"""`waypost hook EVENT --host HOST`: an agent host's hook, its JSON on stdin, the answer on
stdout in the host's own format (`waypost.hooks.hosts` reads and writes the shapes;
`waypost.hooks.decide` decides).

Events: `stop` (Gemini CLI's `AfterAgent`) and `subagent-stop` refuse a stop while the run
has no result packet; `session-start` gives the agent the handoff brief of the session's
run, `user-prompt-submit` its one-line status. Every host lets the agent stop when a hook
exits with any code but 0 and 2 (fails open), so every failure of the hook's own (bad
JSON, a store that cannot be opened or is busy past the wait) is answered, exit 0, as a
refusal whose reason says what broke; at a session's start or a prompt it is told as
context instead (those are never refused).

Run on every stop and prompt, so it stays a hot verb: no click, no HTTP, MCP or PostgreSQL
stack unless the store is one, and a bounded wait for a busy store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Final

from waypost.cli.context import Ctx
from waypost.errors import InvalidInput, NotFound, Refused, WaypostError
from waypost.hooks import decide as hooks
from waypost.hooks import hosts as hook_hosts
from waypost.hooks.cap import capped
from waypost.hooks.decide import Context, StopDecision
from waypost.hooks.hosts import HookCall
from waypost.model import TERMINAL, Packet

RUN_ENV: Final = "WAYPOST_RUN"  # a run a parent started for this session (session-start)
MAX_INPUT: Final = 1 << 20  # bytes of hook JSON read at most (a host sends a few hundred)
INPUT_WAIT: Final = 5.0  # seconds the host's JSON may take to arrive in whole
HOOK_WAIT: Final = "5s"  # a busy store is waited for this long, unless WAYPOST_BUSY_TIMEOUT


def answer(ctx: Ctx, event: str, host: str, cap: int) -> None:
    """Decide, and print the host's answer; never raises (a failure is a refusal)."""
    try:
        said: StopDecision | Context = _decide(ctx, event, host, cap)
    except WaypostError as exc:
        from waypost.cli.steps import hint as worded  # only on a failure

        words = worded(exc)
        hint = f" (next: {words})" if words else ""
        said = _failed(event, f"waypost hook failed: {exc}{hint}")
    except Exception as exc:  # a bug must not let the agent stop unchecked
        said = _failed(event, f"waypost hook failed unexpectedly: {type(exc).__name__}: {exc}")
    out, err = hook_hosts.render(host, event, said)
    # as bytes: JSON is UTF-8 whatever the locale says, and text a stream could not encode
    # must not end the hook with an error (which would let the agent stop)
    for stream, text in ((sys.stdout, out), (sys.stderr, err)):
        binary = getattr(stream, "buffer", None)  # none: a text-only stream (a test's capture)
        if not text:
            continue
        stream.flush()
        if binary is None:
            stream.write(text + "\n")
        else:
            binary.write(text.encode("utf-8", "backslashreplace") + b"\n")
        stream.flush()


def _failed(event: str, reason: str) -> StopDecision | Context:
    if event in hook_hosts.CONTEXTS:
        return Context(text=reason)
    return StopDecision(block=True, reason=reason)


def _decide(ctx: Ctx, event: str, host: str, cap: int) -> StopDecision | Context:
    hook_hosts.check_supported(host, event)  # before stdin is read: a wrong hook says so
    call = hook_hosts.read_call(host, event, read_input(), MAX_INPUT)
    require = ctx.config.require_run
    if ctx.store_url is None and _no_default_store():
        if require and event == "stop":
            return StopDecision(block=True, reason=(
                f"waypost: this project requires a run for every session, and there is no "
                f"waypost store here: waypost init, then {hooks.start_command(call.session)}"))
        return _without_run(call, require)
    with bounded_wait():
        if event in hook_hosts.CONTEXTS:
            return _context(ctx, call, require)
        return _decide_stop(ctx, call, cap, require)


def _without_run(call: HookCall, require: bool) -> StopDecision | Context:
    if call.event in hook_hosts.CONTEXTS:
        return hooks.no_run_context(call.session, require_run=require)
    if call.event == "subagent-stop":
        return _subagent_free(call)
    return hooks.decide_stop(None, call.session, require_run=require)


def _subagent_free(call: HookCall) -> StopDecision:
    """A subagent with no run of its own may stop: the requirement is the session's."""
    who = f"subagent {call.agent}" if call.agent else "this subagent (the host named none)"
    return StopDecision(block=False, reason=f"waypost: no run is recorded for {who}; "
                        "nothing to check")


def _context(ctx: Ctx, call: HookCall, require: bool) -> Context:
    run_id = ctx.store.session_run(call.session)
    packet = ctx.store.get(run_id) if run_id else None
    named = os.environ.get(RUN_ENV, "").strip()
    if packet is None and call.event == "session-start" and named:
        packet = _attach(ctx, call.session, named)
    if packet is None:
        return hooks.no_run_context(call.session, require_run=require)
    if call.event == "session-start" and packet.state not in TERMINAL and packet.worker:
        from waypost.durations import utcnow
        from waypost.usecases.handoff import brief, brief_text

        return Context(text=brief_text(brief(packet, ctx.store.events(packet.id)), utcnow()))
    return Context(text=hooks.status_line(packet))


def _attach(ctx: Ctx, session: str, run_id: str) -> Packet:
    """A session started for a run its parent named (`WAYPOST_RUN`): the session becomes
    the run's, so its stop hook holds it to that run from the first stop."""
    try:
        packet = ctx.store.get(run_id[:200])
    except NotFound as exc:
        raise NotFound(f"{RUN_ENV}={run_id[:80]!r} names no run in this store",
                       hint="start it first, or unset " + RUN_ENV) from exc
    if packet.state in TERMINAL:
        raise Refused(f"{RUN_ENV} names run {packet.id}, which is {packet.state}: this session "
                      "is not attached to it", hint="start a new run for this work")
    ctx.store.attach_session(packet.id, session)
    return packet


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


def _decide_stop(ctx: Ctx, call: HookCall, cap: int, require: bool) -> StopDecision:
    """The run's rule, the cap and the turn: a subagent's stop by its own run (the one
    started with the agent's id as --session), a session's by the session's."""
    store = ctx.store
    if call.event == "subagent-stop":
        run_id = store.session_run(call.agent) if call.agent else None
    else:
        run_id = store.session_run(call.session)
    packet = store.get(run_id) if run_id else None
    if packet is None:
        if call.event == "subagent-stop":
            return _subagent_free(call)
        refused = hooks.decide_stop(None, call.session, require_run=require)
        return _count_without_run(ctx, call, refused, cap) if refused.block else refused
    decision = hooks.decide_stop(packet, call.session)
    turn = hooks.turn_key(call.turn, packet.version) if call.turn else None
    return capped(store, packet, decision, cap=cap, turn=turn)


def _count_without_run(ctx: Ctx, call: HookCall, refused: StopDecision,
                       cap: int) -> StopDecision:
    """A session refused for having no run (`[hooks] require_run`): its refusals counted in
    a store setting, as there is no run to count them on, and past the cap let stop, saying
    so. One stop of one Cursor turn counts once, as with a run."""
    store = ctx.store
    name = hooks.no_run_count_setting(call.session)
    count, _, seen = store.settings().get(name, "").partition("\x1f")
    turn = hooks.turn_key(call.turn, 0) if call.turn else ""
    blocks = int(count) if count.isdigit() else 0
    if not (turn and turn == seen):
        blocks += 1
    if blocks > cap:
        store.put_setting(name, None)
        return StopDecision(block=False, reason=(
            f"waypost: session {call.session} was refused a stop {blocks - 1} times in a row "
            f"for having no run and is let stop, with no run to record it on. Start one "
            f"before the next session: {hooks.start_command(call.session)}"))
    store.put_setting(name, f"{blocks}\x1f{turn}")
    return refused


def _no_default_store() -> bool:
    from waypost.store import find_default

    return find_default() is None


@contextlib.contextmanager
def bounded_wait() -> Iterator[None]:
    """Wait for a busy store `HOOK_WAIT` at most (unless WAYPOST_BUSY_TIMEOUT says), well
    below a host's hook timeout (Claude Code's: 60 s)."""
    from waypost.store.shared import BUSY_TIMEOUT_ENV

    if os.environ.get(BUSY_TIMEOUT_ENV):
        yield
        return
    os.environ[BUSY_TIMEOUT_ENV] = HOOK_WAIT
    try:
        yield
    finally:
        os.environ.pop(BUSY_TIMEOUT_ENV, None)
