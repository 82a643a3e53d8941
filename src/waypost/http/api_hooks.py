"""`POST /hooks/claude/{event}`: Claude Code's HTTP hooks, so a host on another machine
uses the gate. The body is what the host would give `waypost hook` on stdin; the answer is
its JSON (`{"decision": "block", "reason": …}` makes the agent go on; `{}` lets it stop).
The decisions are `waypost.hooks.decide`'s, the same as the command line's; one route serves every
event in `DECIDERS`, so a new event needs a decider, not a route.

The token's holder must read the session's run; counting the refused stops and recording
the cap's blocker are writes, done only for a role that may block (a worker's or owner's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final

import msgspec
from anyio import to_thread
from litestar import Request, post
from litestar.params import PathParameter, QueryParameter

from waypost.core import access
from waypost.core.access import Operation
from waypost.errors import InvalidInput, NotAuthorized, NotFound
from waypost.hooks import decide as hooks
from waypost.hooks.cap import capped
from waypost.http import shapes
from waypost.http.api_files import read_at_most
from waypost.http.deps import CallerDep, StoreDep
from waypost.http.errors import ERRORS
from waypost.model import Grant, Packet
from waypost.store.base import Store

MAX_INPUT: Final = 1 << 20  # bytes of hook JSON taken at most (a host sends a few hundred)


class ClaudeStop(msgspec.Struct, frozen=True, kw_only=True):
    """What Claude Code sends a Stop hook (fields it may add later are ignored)."""

    session_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    hook_event_name: str
    stop_hook_active: bool = False


Decider = Callable[[Store, Grant, bytes, int], shapes.HookAnswer]


@post("/hooks/claude/{event:str}", responses=ERRORS, status_code=200, tags=["hooks"],
      request_max_body_size=None, summary="Claude Code's HTTP hook: the same decision as "
      "`waypost hook EVENT --host claude`")
async def claude_hook(
    request: Request[Any, Any, Any], store: StoreDep, caller: CallerDep,
    event: Annotated[str, PathParameter(max_length=40, description="The hook event: stop.")],
    cap: Annotated[int, QueryParameter(ge=1, le=100, description=(
        "Refused stops in a row before the agent may stop anyway."))] = hooks.DEFAULT_STOP_CAP,
) -> shapes.HookAnswer:
    decide = DECIDERS.get(event.lower())
    if decide is None:
        raise NotFound(f"no hook event {event[:40]!r} for claude (known: "
                       f"{', '.join(DECIDERS)})", hint="register the hook under Stop")
    body = await read_at_most(request, MAX_INPUT)
    return await to_thread.run_sync(decide, store, caller, body, cap)


def claude_stop(store: StoreDep, caller: CallerDep, body: bytes, cap: int) -> shapes.HookAnswer:
    try:
        stop = msgspec.json.decode(body, type=ClaudeStop)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the body is not Claude Code's Stop JSON: {exc}") from exc
    if stop.hook_event_name != "Stop":
        raise InvalidInput(f"POST /hooks/claude/stop got a {stop.hook_event_name[:40]!r} "
                           "event", hint="register this URL under Stop")
    run_id = store.session_run(stop.session_id)
    packet = store.get(run_id) if run_id else None
    if packet is not None:
        access.check_operation(caller, Operation.READ, packet)
    decision = hooks.decide_stop(packet, stop.session_id)
    if packet is not None and counts(caller, packet):
        decision = capped(store, packet, decision, cap=cap, actor=caller.holder)
    if decision.block:
        return {"decision": "block", "reason": decision.reason}
    return {"systemMessage": decision.reason}


def counts(caller: Grant, packet: Packet) -> bool:
    try:
        access.check_operation(caller, Operation.BLOCK, packet)
    except NotAuthorized:
        return False
    return True


DECIDERS: Final[dict[str, Decider]] = {"stop": claude_stop}
