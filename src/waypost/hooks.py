"""What an agent host's hooks decide, pure: may the agent stop now, and why (not).

A host asks on every stop; the answer comes from the session's run alone: the packet in,
a decision with a reason that names the exact next command out. The adapters (`waypost hook`
on the command line, the HTTP endpoint) render it in each host's own format, count the
refusals and record the cap's blocker.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

import msgspec

from waypost.model import TERMINAL, Blocker, BlockerKind, Packet, State, Verdict

# DESIGN.md: the worker resolves its own obstacles; only the owner gives the input, the
# permission or the new target. A silent worker's blocker is resolved by `resume`, which
# the session's own agent can run.
WORKER_RESOLVES: Final = frozenset({BlockerKind.FAILED_COMMAND, BlockerKind.UNAVAILABLE_RESOURCE,
                                    BlockerKind.OTHER, BlockerKind.WORKER_SILENT})
OWNER_RESOLVES: Final = frozenset({BlockerKind.MISSING_INPUT, BlockerKind.PERMISSION_BOUNDARY,
                                   BlockerKind.DEADLINE_PASSED, BlockerKind.DELIVERY_FAILED})
DEFAULT_STOP_CAP: Final = 8  # consecutive refusals of one session, then the agent may stop
CAP_MARK: Final = "waypost hook:"  # how the cap's own blocker begins its detail


class StopDecision(msgspec.Struct, frozen=True, kw_only=True):
    block: bool  # True: the agent must go on, with `reason` as its next instruction
    reason: str


def decide_stop(packet: Packet | None, session: str) -> StopDecision:
    """May the agent of `session` stop, given its run's packet (None: it has no run)?"""
    if packet is None:
        return StopDecision(block=False, reason=(
            f"waypost: no run is recorded for session {session}; nothing to check"))
    run = packet.id
    if packet.state in TERMINAL or packet.state in (State.READY_FOR_REVIEW, State.APPROVED):
        return StopDecision(block=False, reason=f"waypost: run {run} is {packet.state}: "
                            f"{_after_ready(packet)}")
    if packet.state is State.BLOCKED:
        return _decide_blocked(packet)
    return StopDecision(block=True, reason=f"waypost: run {run} is in_progress with no "
                        f"result packet. {_next_step(packet)}")


def _after_ready(packet: Packet) -> str:
    if packet.state is State.READY_FOR_REVIEW:
        return f"the result waits for {packet.owner}'s review; the agent may stop"
    return "nothing is left for the agent to do; it may stop"


def _decide_blocked(packet: Packet) -> StopDecision:
    mine = [b for b in packet.open_blockers if b.kind in WORKER_RESOLVES
            and not b.detail.startswith(CAP_MARK)]
    if mine:
        first = mine[0]
        fix = (f"waypost resume {packet.id}" if first.kind is BlockerKind.WORKER_SILENT
               else f"resolve it, then: waypost unblock {packet.id} {first.id} "
               "--resolution TEXT")
        return StopDecision(block=True, reason=(
            f"waypost: run {packet.id} is blocked by {_named(mine)}, which the worker "
            f"resolves: {fix}"))
    if not any(b.kind in OWNER_RESOLVES for b in packet.open_blockers):
        return StopDecision(block=False, reason=(
            f"waypost: run {packet.id} is blocked by {_named(packet.open_blockers)}: the stop "
            "hook gave up on this session; the agent may stop"))
    return StopDecision(block=False, reason=(
        f"waypost: run {packet.id} is blocked by {_named(packet.open_blockers)}, which only "
        f"its owner {packet.owner} can resolve; the agent may stop"))


def _named(blockers: Sequence[Blocker]) -> str:
    return "; ".join(f"{b.id} ({b.kind}: {b.detail})" for b in blockers)


def _next_step(packet: Packet) -> str:
    """The one command that moves an in-progress run toward its result packet."""
    run = packet.id
    for missing in missing_gate_evidence(packet):
        kind, _, arg = missing.partition(":")
        if kind == "command":
            return f"Record the gate's evidence: waypost evidence run {run} -- {arg}"
        return (f"Record the artifact the gate checks: waypost artifact add {run} "
                f"{shlex.quote(arg)} --role result")
    if not packet.evidence:
        return f"Record evidence first: waypost evidence run {run} -- CMD ARGS..."
    artifacts = " ".join(f"--artifact {shlex.quote(a.name)}" for a in packet.artifacts)
    return (f"When the work is done, submit it: waypost ready {run} --summary TEXT"
            + (f" {artifacts}" if artifacts else ""))


def missing_gate_evidence(packet: Packet) -> list[str]:
    """Required gates (`command:` and `artifact:` ones) the worker has no evidence for yet:
    no passed run of that command, no artifact of that name."""
    passed = {_words(e.command) for e in packet.evidence
              if e.command and e.verdict is Verdict.PASSED}
    named = {a.name for a in packet.artifacts}
    missing = []
    for gate in packet.gates:
        kind, _, arg = gate.check.partition(":")
        if not gate.required or not arg.strip():
            continue
        if (kind == "command" and _words(arg) not in passed) or (
                kind == "artifact" and arg not in named):
            missing.append(gate.check)
    return missing


def _words(command: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(command))
    except ValueError:
        return (command,)


def cap_blocker_open(packet: Packet) -> bool:
    """Whether the cap's blocker (opened when the hook let the agent stop) is still open."""
    return any(b.detail.startswith(CAP_MARK) for b in packet.open_blockers)


def cap_detail(decision: StopDecision, blocks: int) -> str:
    """The cap's blocker: what the agent was told `blocks` times without getting there."""
    told = decision.reason.removeprefix("waypost: ")
    return (f"{CAP_MARK} the agent was refused a stop {blocks} times in a row and was let "
            f"stop; still needed: {told}")[:2000]


# --- the host's settings: waypost's entries merged in and taken out ---------------------

CLAUDE_COMMANDS: Final[dict[str, str]] = {"Stop": "waypost hook stop --host claude"}
_OURS: Final = "waypost hook "


def _is_ours(entry: object) -> bool:
    return (isinstance(entry, dict) and entry.get("type") == "command"
            and isinstance(entry.get("command"), str) and entry["command"].startswith(_OURS))


def install_claude(settings: dict[str, object]) -> dict[str, object]:
    """`settings` (Claude Code's settings.json) with waypost's hooks added once; every other
    key, event and hook kept as it was."""
    merged = uninstall_claude(settings)
    events = merged.setdefault("hooks", {})
    if not isinstance(events, dict):
        raise ValueError("its \"hooks\" is not an object")
    for event, command in CLAUDE_COMMANDS.items():
        groups = events.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"its hooks.{event} is not a list")
        groups.append({"hooks": [{"type": "command", "command": command}]})
    return merged


def uninstall_claude(settings: dict[str, object]) -> dict[str, object]:
    """`settings` without waypost's hooks: a group left empty by that goes too, and so do an
    event and the "hooks" object left empty (install created them)."""
    copied: dict[str, object] = msgspec.json.decode(msgspec.json.encode(settings))
    events = copied.get("hooks")
    if not isinstance(events, dict):
        return copied
    removed = False
    for event in list(events):
        groups = events[event]
        if not isinstance(groups, list) or not any(_holds_ours(g) for g in groups):
            continue  # untouched, even when empty: install did not make it so
        removed = True
        kept = []
        for group in groups:
            if not (isinstance(group, dict) and _holds_ours(group)):
                kept.append(group)
                continue
            rest = [h for h in group["hooks"] if not _is_ours(h)]
            if rest:  # a group install made held ours alone: it goes
                kept.append({**group, "hooks": rest})
        if kept:
            events[event] = kept
        else:
            del events[event]
    if removed and not events:
        del copied["hooks"]
    return copied


def _holds_ours(group: object) -> bool:
    inner = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(inner, list) and any(_is_ours(h) for h in inner)
