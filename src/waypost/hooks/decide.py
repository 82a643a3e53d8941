"""What an agent host's hooks decide, pure: may the agent stop now, and why (not); what
a new session, or a new prompt, is told about its run.

A host asks on every stop; the answer comes from the session's run alone: the packet in,
a decision with a reason that names the exact next command out. The adapters (`waypost hook`
on the command line, the HTTP endpoint) render it in each host's own format
(`waypost.hooks.hosts`), count the refusals and record the cap's blocker.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

import msgspec

from waypost.core.authority import OWNER_RESOLVES, RESUME_RESOLVES, WORKER_RESOLVES
from waypost.display import one_line
from waypost.errors import Step, step
from waypost.model import TERMINAL, Blocker, Packet, State, Verdict
from waypost.usecases.commands import command

# who resolves which blocker is `core.authority`'s table; the session's own agent resolves
# the worker's kinds, and a silent worker's blocker with `resume`, which it can run
AGENT_RESOLVES: Final = WORKER_RESOLVES | RESUME_RESOLVES
DEFAULT_STOP_CAP: Final = 8  # consecutive refusals of one session, then the agent may stop
CAP_MARK: Final = "waypost hook:"  # how the cap's own blocker begins its detail


class StopDecision(msgspec.Struct, frozen=True, kw_only=True):
    block: bool  # True: the agent must go on, with `reason` as its next instruction
    reason: str


class Context(msgspec.Struct, frozen=True, kw_only=True):
    text: str | None  # what the agent is told (None: nothing), at a session's start or a prompt


class Addressee(msgspec.Struct, frozen=True, kw_only=True):
    """Whom a session's instructions are written for: `--as actor`, and `--epoch epoch`
    only when the session holds the lease at that epoch (None: it is not known to)."""

    actor: str | None
    epoch: int | None = None


def addressee(packet: Packet, reader: str | None, *,
              changed_hands: bool = False) -> Addressee:
    """Who the agent of the run's session is. A run's session is its worker's (`start
    --worker W --session S`, or `WAYPOST_RUN` in the worker's host), so the lease holder,
    at the lease's epoch; unless the session says it acts as someone else
    (`WAYPOST_ACTOR`, a token's holder): then that actor, and no epoch, which is never
    handed to whom does not hold it. A lease another actor took over (`changed_hands`)
    may be held in another session: then a session that names no actor is told none."""
    lease = packet.worker
    if lease is None or (reader is None and changed_hands):
        return Addressee(actor=reader)
    if reader is None or reader == lease.actor:
        return Addressee(actor=lease.actor, epoch=lease.epoch)
    return Addressee(actor=reader)


def _said(s: Step, to: Addressee | None) -> str:
    return command(s, epoch=to.epoch if to is not None else None)


def _to(verb: str, run: str, to: Addressee | None, **kw: str) -> Step:
    return step(verb, run, actor=to.actor if to is not None else None, **kw)


def decide_stop(packet: Packet | None, session: str, *, require_run: bool = False,
                to: Addressee | None = None) -> StopDecision:
    """May the agent of `session` stop, given its run's packet (None: it has no run)? A
    project that requires a run for every session (`[hooks] require_run`) refuses a stop
    with none, naming the command that starts one. Each command named is written for `to`
    (`addressee`), so that it runs as written."""
    if packet is None:
        if require_run:
            return StopDecision(block=True, reason=(
                f"waypost: this project requires a run for every session, and session "
                f"{session} has none. Start one: {start_command(session)}"))
        return StopDecision(block=False, reason=(
            f"waypost: no run is recorded for session {session}; nothing to check"))
    run = packet.id
    if packet.state in TERMINAL or packet.state in (State.READY_FOR_REVIEW, State.APPROVED):
        return StopDecision(block=False, reason=f"waypost: run {run} is {packet.state}: "
                            f"{_after_ready(packet)}")
    if packet.state is State.BLOCKED:
        return _decide_blocked(packet, to)
    return StopDecision(block=True, reason=f"waypost: run {run} is in_progress with no "
                        f"result packet. {_next_step(packet, to)}")


def _after_ready(packet: Packet) -> str:
    if packet.state is State.READY_FOR_REVIEW:
        return f"the result waits for {packet.owner}'s review; the agent may stop"
    return "nothing is left for the agent to do; it may stop"


def _decide_blocked(packet: Packet, to: Addressee | None) -> StopDecision:
    mine = [b for b in packet.open_blockers if b.kind in AGENT_RESOLVES
            and not b.detail.startswith(CAP_MARK)]
    if mine:
        first = mine[0]
        # a resume starts a new lease: it never carries the old one's epoch
        fix = (command(_to("resume", packet.id, to)) if first.kind in RESUME_RESOLVES
               else "resolve it, then: " + _said(_to("unblock", packet.id, to,
                                                      blocker=first.id), to))
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


def _next_step(packet: Packet, to: Addressee | None) -> str:
    """The one command that moves an in-progress run toward its result packet."""
    then = advance(packet, to.actor if to is not None else None)
    said = f"{then.why}: {_said(then, to)}"
    if then.verb == "ready":  # the artifacts recorded, named for the result
        said += "".join(f" --artifact {shlex.quote(a.name)}" for a in packet.artifacts)
    return said


def advance(packet: Packet, actor: str | None = None) -> Step:
    """The one step that moves an in-progress run toward its result packet, for `actor`
    (None: whoever takes it): the evidence or artifact a required gate still lacks, some
    evidence, else the result."""
    run = packet.id
    for missing in missing_gate_evidence(packet):
        kind, _, arg = missing.partition(":")
        if kind == "command":
            return step("evidence", run, actor=actor, command=arg,
                        why="Record the gate's evidence")
        return step("artifact", run, actor=actor, name=arg, role="result", fill=["content"],
                    why="Record the artifact the gate checks")
    if not packet.evidence:
        return step("evidence", run, actor=actor, why="Record evidence first")
    return step("ready", run, actor=actor, why="When the work is done, submit it")


def then_for(packet: Packet, actor: str) -> Step | None:
    """What `actor` does next on the run, as a step (None: nothing of theirs): its worker
    moves it toward the result or out of the worker's own blocker; its owner reviews a
    result, and has an approved one delivered."""
    lease = packet.worker
    works = lease is not None and lease.actor == actor
    if packet.state is State.IN_PROGRESS and works:
        return advance(packet, actor)
    if packet.state is State.BLOCKED and works:
        mine = [b for b in packet.open_blockers if b.kind in WORKER_RESOLVES]
        if mine:
            return step("unblock", packet.id, actor=actor, blocker=mine[0].id,
                        why="resolve it, then")
    if packet.state is State.READY_FOR_REVIEW and packet.owner == actor:
        return step("review", packet.id, actor=actor, why="review the result")
    if packet.state is State.APPROVED and packet.owner == actor:
        return step("deliver", why="the relay sends the result once")
    return None


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


def start_command(session: str) -> str:
    """The command that starts the run a session's hooks find (TITLE and URI to fill in)."""
    return f"waypost start TITLE --target URI --session {shlex.quote(session)}"


def status_line(packet: Packet, to: Addressee | None = None) -> str:
    """The run in one line: where it stands and the next command (a prompt's context)."""
    run = f"waypost: run {packet.id} ({packet.title})"
    if packet.state in (State.IN_PROGRESS, State.BLOCKED):
        said = decide_stop(packet, "", to=to).reason.removeprefix(f"waypost: run {packet.id} ")
        line = f"{run} {said}"
    elif packet.state is State.READY_FOR_REVIEW:
        line = f"{run} is ready_for_review: the result waits for {packet.owner}'s review"
    else:
        line = f"{run} is {packet.state}: nothing is left for the agent to do"
    return one_line(line, limit=1000)


def no_run_context(session: str, *, require_run: bool) -> Context:
    """What a session with no run is told: nothing, unless the project requires one."""
    if not require_run:
        return Context(text=None)
    return Context(text=(f"waypost: this project requires a run for every session; session "
                         f"{session} has none yet. Start one before the work: "
                         f"{start_command(session)}"))


def turn_key(turn: Sequence[str], version: int) -> str:
    """What names one stop of one turn: the host's own turn (Cursor: its generation and
    loop count) and the run's version then. Two deliveries of that stop share it; the next
    stop, after a follow-up, does not. (Its parts are ids of 200 characters at most.)"""
    return "\x1f".join([*turn, str(version)])


def no_run_count_setting(session: str) -> str:
    """The store setting that counts a session's refusals for having no run (there is no
    run row to count them on): named after the session, or a digest of an id that does not
    fit a setting's name."""
    from waypost.store.shared import MAX_SETTING_NAME, SETTING_NAME_CHARS

    name = "hook.norun." + session
    if len(name) <= MAX_SETTING_NAME and set(name) <= SETTING_NAME_CHARS:
        return name
    import hashlib  # here: most hosts' session ids (UUIDs) fit as they are

    return "hook.norun." + hashlib.sha256(session.encode()).hexdigest()[:40]
