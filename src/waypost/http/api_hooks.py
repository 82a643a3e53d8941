"""`POST /hooks/claude/{event}`: Claude Code's HTTP hooks, so a host on another machine
uses the gate. The body is what the host would give `waypost hook EVENT --host claude` on
stdin; the answer is the same one (`waypost.hooks.answer`), as JSON: `{"decision":
"block", "reason": …}` makes the agent go on; a stop let through is `{"systemMessage":
…}`; context is `{"hookSpecificOutput": …}`; nothing to say is `{}`.

This door reads the body, the bearer token and the URL's `cap` and `run` (the run a parent
started the session for, as `WAYPOST_RUN` is on the command line) and renders the answer.
It answers 200 whatever happens, its own failures included (bad JSON, a body sent as
another media type than JSON, nested past `inputs.MAX_NESTING`, a missing, unknown,
revoked or expired token, the board's cookie instead of a token, an unknown run, a store
error): a host reads any other status as "the hook failed", which at a stop lets the agent
stop unchecked."""

from __future__ import annotations

from typing import Annotated, Any, Final

from anyio import to_thread
from litestar import Request, post
from litestar.params import PathParameter, QueryParameter

from waypost import inputs
from waypost.errors import InvalidInput, TooLarge, Unauthenticated, WaypostError
from waypost.hooks import answer as hook_answer
from waypost.hooks.cap import MemoryTally, read_cap
from waypost.hooks.decide import DEFAULT_STOP_CAP
from waypost.http import auth, edge, shapes
from waypost.http.api_files import read_at_most
from waypost.http.deps import ConfigDep, StoreDep

HOOK_MEDIA: Final = ("application/json", "")  # what the hosts send (none: taken, as before)
TALLY: Final = "hook_tally"  # the app state's MemoryTally: refusals not written to the store


@post("/hooks/claude/{event:str}", status_code=200, tags=["hooks"],
      request_max_body_size=None, summary="Claude Code's HTTP hook: the same answer as "
      "`waypost hook EVENT --host claude`, always 200")
async def claude_hook(
    request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
    event: Annotated[str, PathParameter(description=(
        "The hook event: stop, subagent-stop, session-start or user-prompt-submit."))],
    cap: Annotated[str | None, QueryParameter(description=(
        "Refused stops in a row before the agent may stop anyway (1 to 1000)."))] = None,
    run: Annotated[str | None, QueryParameter(description=(
        "The run a parent started this session for (WAYPOST_RUN's twin): a session start "
        "attaches the session to it; a stop of a session with no run is held to it."))] = None,
) -> shapes.HookAnswer:
    problem: WaypostError | None = None
    body = b""
    try:
        edge.media(request, HOOK_MEDIA)
        body = await read_at_most(request, hook_answer.MAX_INPUT)
        inputs.nesting(body, "the hook's input")
    except TooLarge:
        problem = InvalidInput(f"the hook's input is over {hook_answer.MAX_INPUT} bytes")
    except WaypostError as exc:
        problem = exc
    limit = DEFAULT_STOP_CAP
    try:
        limit = read_cap(cap) if cap is not None else limit
    except ValueError as exc:
        problem = problem or InvalidInput(f"?cap={(cap or '')[:20]!r}: {exc}")
    terms = hook_answer.Terms(cap=limit, require_run=config.project.require_run,
                              named_run=(run or "").strip() or None, named_by="?run",
                              project=config.project)
    caller = hook_answer.Remote(secret=_secret(request), tally=_tally(request))

    def read() -> bytes:  # what this door could not read is the answer's failure too
        if problem is not None:
            raise problem
        return body

    def respond() -> shapes.HookAnswer:
        return hook_answer.answer(lambda: store, "claude", event, read, caller=caller,
                                  terms=terms).document()

    return await to_thread.run_sync(respond)


def _secret(request: Request[Any, Any, Any]) -> str | None:
    try:
        return auth.bearer_of(request)
    except Unauthenticated:
        return None  # a header that is not a bearer token's, or the board's cookie: none


def _tally(request: Request[Any, Any, Any]) -> MemoryTally:
    """The app's memory tally, made at its first hook call (on the event loop's thread,
    so once)."""
    state = request.app.state
    tally = state.get(TALLY)
    if not isinstance(tally, MemoryTally):
        tally = state[TALLY] = MemoryTally()
    return tally
