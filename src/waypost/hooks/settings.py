"""waypost's hooks merged into an agent host's own settings file and taken out again, pure:
every other key, event and hook is kept as it was.

Claude Code (`.claude/settings.json`), Codex (`.codex/hooks.json`) and Gemini CLI
(`.gemini/settings.json`) share one shape: `{"hooks": {EVENT: [{"hooks": [{"type":
"command", "command": …}]}]}}`. Cursor's `.cursor/hooks.json` lists the commands under each
event directly: `{"version": 1, "hooks": {event: [{"command": …}]}}` (`version` defaults to
1, so install does not add it). waypost's entries are the commands that begin
`waypost hook `.
"""

from __future__ import annotations

from typing import Final

import msgspec

# the host's event → waypost's event, in the order install adds them
HOST_EVENTS: Final[dict[str, dict[str, str]]] = {
    "claude": {"Stop": "stop", "SubagentStop": "subagent-stop",
               "SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"},
    "codex": {"Stop": "stop", "SubagentStop": "subagent-stop",
              "SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"},
    "gemini": {"AfterAgent": "stop", "SessionStart": "session-start",
               "BeforeAgent": "user-prompt-submit"},
    "cursor": {"stop": "stop", "subagentStop": "subagent-stop",
               "sessionStart": "session-start"},
}
FLAT: Final = frozenset({"cursor"})  # hosts whose events list commands, not groups of them
_OURS: Final = "waypost hook "


def command(host: str, event: str) -> str:
    return f"waypost hook {event} --host {host}"


def _is_ours(entry: object) -> bool:
    return (isinstance(entry, dict) and entry.get("type", "command") == "command"
            and isinstance(entry.get("command"), str) and entry["command"].startswith(_OURS))


def install(host: str, settings: dict[str, object]) -> dict[str, object]:
    """`settings` with waypost's hooks for `host` added once (ValueError: a shape it cannot
    merge into, named)."""
    merged = uninstall(settings)
    events = merged.setdefault("hooks", {})
    if not isinstance(events, dict):
        raise ValueError("its \"hooks\" is not an object")
    for host_event, event in HOST_EVENTS[host].items():
        entries = events.setdefault(host_event, [])
        if not isinstance(entries, list):
            raise ValueError(f"its hooks.{host_event} is not a list")
        hook = {"type": "command", "command": command(host, event)}
        entries.append({"command": hook["command"]} if host in FLAT else {"hooks": [hook]})
    return merged


def uninstall(settings: dict[str, object]) -> dict[str, object]:
    """`settings` without waypost's hooks: a group left empty by that goes too, and so do an
    event and the "hooks" object left empty (install created them)."""
    copied: dict[str, object] = msgspec.json.decode(msgspec.json.encode(settings))
    events = copied.get("hooks")
    if not isinstance(events, dict):
        return copied
    removed = False
    for event in list(events):
        entries = events[event]
        if not isinstance(entries, list) or not any(_holds_ours(e) for e in entries):
            continue  # untouched, even when empty: install did not make it so
        removed = True
        kept = [rest for rest in (_without_ours(e) for e in entries) if rest is not _GONE]
        if kept:
            events[event] = kept
        else:
            del events[event]
    if removed and not events:
        del copied["hooks"]
    return copied


def _holds_ours(entry: object) -> bool:
    inner = entry.get("hooks") if isinstance(entry, dict) else None
    return _is_ours(entry) or (isinstance(inner, list) and any(_is_ours(h) for h in inner))


_GONE = object()  # what is left of an entry that was waypost's alone (a user's may be null)


def _without_ours(entry: object) -> object:
    """The entry without waypost's commands; `_GONE` when nothing of it is left (a flat
    entry that is ours, a group that held ours alone: install made both)."""
    if _is_ours(entry):
        return _GONE
    if not (isinstance(entry, dict) and _holds_ours(entry)):
        return entry
    rest = [h for h in entry["hooks"] if not _is_ours(h)]
    return {**entry, "hooks": rest} if rest else _GONE
