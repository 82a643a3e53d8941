"""Each agent host's hook JSON, pure: what it sends a hook on stdin, read into one call,
and the answer written back in that host's own format. Shapes as each host documents them:

- Claude Code: input `session_id`, `hook_event_name` (`Stop`, `SubagentStop` with
  `agent_id`, `SessionStart`, `UserPromptSubmit`), …; a stop is refused with
  `{"decision": "block", "reason": …}` on stdout, allowed with no output; context is
  `{"hookSpecificOutput": {"hookEventName": …, "additionalContext": …}}`.
- Codex: Claude Code's shapes (its hook schemas: `Stop` and `SubagentStop` take
  `decision`/`reason`, `SessionStart` and `UserPromptSubmit` take `hookSpecificOutput`).
- Gemini CLI: `AfterAgent` plays Stop's role and is refused with `{"decision": "deny",
  "reason": …}` (the reason becomes the agent's next prompt); `SessionStart` and
  `BeforeAgent` take `hookSpecificOutput.additionalContext`. Its stdout must be JSON alone,
  so an answer with nothing to say is `{}`. It has no subagent event.
- Cursor: input `conversation_id` (`session_id` at `sessionStart`), `generation_id` (new
  with every user message, a follow-up included), `hook_event_name`; `stop` and
  `subagentStop` take `{"followup_message": …}`, `sessionStart` `{"additional_context":
  …}`. Its `beforeSubmitPrompt` answers only allow or block: no context, so
  `user-prompt-submit` is not offered for it. Cursor also runs Claude Code's hooks (its
  third-party setting), mapping `Stop` to `stop` and accepting Claude Code's answers, so a
  `--host claude` hook may be fed Cursor's input: it is read too.

Every host lets the agent stop when a hook exits with any code but 0 and 2 (an HTTP hook:
answers any status but 2xx), so `waypost.hooks.answer` turns its own failures into a
refusal in the same format (`StopDecision(block=True)`).
"""

from __future__ import annotations

from typing import Final

import msgspec

from waypost.errors import InvalidInput
from waypost.hooks.decide import Context, StopDecision

HOSTS: Final = ("claude", "codex", "gemini", "cursor")
STOPS: Final = ("stop", "subagent-stop")  # the events whose answer may refuse
CONTEXTS: Final = ("session-start", "user-prompt-submit")  # the events that tell the agent
MAX_ID: Final = 200  # characters of a session, agent or turn id

# waypost's event → the host event names it answers (the first is the host's own)
EVENT_NAMES: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    "claude": {"stop": ("Stop", "stop"), "subagent-stop": ("SubagentStop", "subagentStop"),
               "session-start": ("SessionStart", "sessionStart"),
               "user-prompt-submit": ("UserPromptSubmit", "beforeSubmitPrompt")},
    "codex": {"stop": ("Stop",), "subagent-stop": ("SubagentStop",),
              "session-start": ("SessionStart",), "user-prompt-submit": ("UserPromptSubmit",)},
    "gemini": {"stop": ("AfterAgent",), "session-start": ("SessionStart",),
               "user-prompt-submit": ("BeforeAgent",)},
    "cursor": {"stop": ("stop",), "subagent-stop": ("subagentStop",),
               "session-start": ("sessionStart",)},
}


class HostInput(msgspec.Struct, frozen=True, kw_only=True):
    """The fields waypost reads of any host's hook input (every other field is ignored)."""

    hook_event_name: str
    session_id: str | None = None  # Claude Code, Codex, Gemini CLI; Cursor's sessionStart
    conversation_id: str | None = None  # Cursor
    agent_id: str | None = None  # Claude Code's and Codex's SubagentStop
    subagent_id: str | None = None  # Cursor (documented on subagentStart)
    generation_id: str | None = None  # Cursor: changes with every user message
    loop_count: int | None = None  # Cursor: follow-ups its stop hook already caused


class HookCall(msgspec.Struct, frozen=True, kw_only=True):
    host: str
    event: str  # waypost's name: stop, subagent-stop, session-start, user-prompt-submit
    session: str
    agent: str | None  # the subagent whose stop this is (its run was started --session ID)
    turn: tuple[str, ...] | None  # what names this stop's turn, when the host says it


def check_supported(host: str, event: str) -> None:
    known = EVENT_NAMES.get(host, {})
    if event not in known:
        raise InvalidInput(f"waypost hook has no {event[:40]!r} event for {host}: it "
                           f"answers {', '.join(known) or 'nothing'} there",
                           hint=f"waypost hooks install --host {host}")


def read_call(host: str, event: str, data: bytes, limit: int) -> HookCall:
    """The host's JSON, decided: well-formed, the event it was registered for, a session."""
    check_supported(host, event)
    if len(data) > limit:
        raise InvalidInput(f"the hook's input is over {limit} bytes")
    try:
        got = msgspec.json.decode(data, type=HostInput)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the hook's input is not {host}'s hook JSON: {exc}") from exc
    names = EVENT_NAMES[host][event]
    if got.hook_event_name not in names:
        raise InvalidInput(f"waypost hook {event} got a {got.hook_event_name[:40]!r} event",
                           hint=f"register it under {names[0]}: waypost hooks install "
                           f"--host {host}")
    session = _usable(got.session_id or got.conversation_id, "session_id")
    if session is None:
        raise InvalidInput("the hook's input has no usable session_id")
    agent = _usable(got.agent_id or got.subagent_id, "agent_id")
    generation = _usable(got.generation_id, "generation_id")
    turn = (generation, str(got.loop_count)) if generation is not None else None
    return HookCall(host=host, event=event, session=session, agent=agent, turn=turn)


def _usable(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    if not value.strip() or len(value) > MAX_ID or any(
            ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInput(f"the hook's input has no usable {field}")
    return value


def render(host: str, event: str, answer: StopDecision | Context) -> tuple[str, str]:
    """(stdout, stderr) of the host's answer; the exit code is always 0."""
    if isinstance(answer, StopDecision):
        return _render_stop(host, answer)
    if answer.text is None:
        return ("" if host in ("claude", "codex") else "{}"), ""
    if host == "cursor":
        return _json({"additional_context": answer.text}), ""
    if host == "gemini":
        return _json({"hookSpecificOutput": {"additionalContext": answer.text}}), ""
    name = EVENT_NAMES[host][event][0]
    return _json({"hookSpecificOutput": {"hookEventName": name,
                                         "additionalContext": answer.text}}), ""


def _render_stop(host: str, decision: StopDecision) -> tuple[str, str]:
    """A refusal makes the agent go on with the reason as its next instruction; an allowed
    stop says nothing the host would act on, and its reason goes to stderr (the host's log)."""
    if not decision.block:
        return ("" if host in ("claude", "codex") else "{}"), decision.reason
    if host == "cursor":
        return _json({"followup_message": decision.reason}), ""
    verdict = "deny" if host == "gemini" else "block"
    return _json({"decision": verdict, "reason": decision.reason}), ""


def _json(document: object) -> str:
    return msgspec.json.encode(document).decode()
