"""Recovery by a new worker: `Run.resume` takes over a silent worker's lease and hands the
new worker a brief built from the packet and its history, so it continues from the last
durable output instead of from the old worker's memory."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime

import msgspec

from waypost.core.authority import ended_by_takeover
from waypost.core.due import lease_until
from waypost.core.history import Step, prepare
from waypost.core.machine import apply
from waypost.core.writes import RunWrite, Snapshot
from waypost.display import one_line
from waypost.durations import format_duration
from waypost.errors import IllegalTransition, step
from waypost.events import BlockerResolved, Claimed, Event
from waypost.model import TERMINAL, Blocker, Evidence, Gate, Packet
from waypost.usecases.artifacts import fetch_command

HISTORY_LINES = 12  # the state history fits one screen


class HistoryLine(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    at: datetime
    actor: str
    event: str
    state: str  # the run's state after the event
    gist: str = ""


class ArtifactRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    role: str
    bytes: int | None
    sha256: str | None
    fetch: str  # the command that gets the bytes, or the URL


class Brief(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a new worker needs to continue the run."""

    run: str
    title: str
    state: str
    owner: str
    worker: str
    epoch: int  # pass it as --epoch (or WAYPOST_EPOCH) on every write
    took_over_from: str | None
    target: str
    notify: str | None
    history: tuple[HistoryLine, ...]
    earlier_events: int  # not shown in `history`; `waypost log RUN` has them all
    heartbeats: int
    last_note: str | None
    last_heartbeat: datetime | None
    progress: float | None
    open_blockers: tuple[Blocker, ...]
    artifacts: tuple[ArtifactRef, ...]
    evidence: tuple[Evidence, ...]
    gates: tuple[Gate, ...]  # what the owner re-runs at review: still to pass
    next_steps: tuple[str, ...]


# --- resume: may it, and the takeover --------------------------------------------------


def check_may_resume(packet: Packet, actor: str) -> None:
    """A run that has ended is not resumed: say so before anything about leases."""
    if packet.state in TERMINAL:
        raise IllegalTransition(
            f"{actor} may not resume {packet.id}: it is {packet.state}, which is final",
            steps=[step("read", packet.id, why="see how it ended")])


def takeover(snap: Snapshot, actor: str, at: datetime, *, verb: str = "resumed") -> RunWrite:
    """The takeover, decided, for `resume` and `claim` alike: a claim (epoch + 1), then
    each blocker a takeover ends (`core.authority.ended_by_takeover`: `worker_silent`)
    resolved; `verb` words the resolution ("resumed", "claimed")."""
    before = snap.packet
    holder = before.worker.actor if before.worker and before.worker.actor != actor else None
    epoch = (before.worker.epoch if before.worker else 0) + 1
    steps: list[Step] = [
        (Claimed(epoch=epoch, lease_expires_at=lease_until(before.stop_rules, at),
                 took_over_from=holder), None)]
    steps += [(BlockerResolved(blocker_id=b.id, resolution=f"{actor} {verb} the run "
                               f"(lease epoch {epoch})"), epoch)
              for b in ended_by_takeover(before)]
    return prepare(snap, steps, actor=actor, at=at)


# --- the brief ------------------------------------------------------------------------


def brief(packet: Packet, events: Sequence[Event]) -> Brief:
    """The handoff brief for the run's current worker."""
    assert packet.worker is not None
    history = _history(events)
    claims = [e.data for e in events if isinstance(e.data, Claimed)]
    took_over = claims[-1].took_over_from if claims else None
    return Brief(
        run=packet.id, title=packet.title, state=packet.state.value, owner=packet.owner,
        worker=packet.worker.actor, epoch=packet.worker.epoch, took_over_from=took_over,
        target=packet.target, notify=packet.notify, history=tuple(history[-HISTORY_LINES:]),
        earlier_events=max(0, len(history) - HISTORY_LINES) + _heartbeats(events),
        heartbeats=packet.progress.heartbeats, last_note=packet.progress.note,
        last_heartbeat=packet.progress.last_heartbeat, progress=packet.progress.fraction,
        open_blockers=packet.open_blockers,
        artifacts=tuple(_artifact_ref(packet, a.name) for a in packet.artifacts),
        evidence=packet.evidence, gates=packet.gates, next_steps=tuple(_next_steps(packet)),
    )


def _heartbeats(events: Sequence[Event]) -> int:
    return sum(1 for e in events if e.type == "heartbeat")


def _history(events: Sequence[Event]) -> list[HistoryLine]:
    """Every event but heartbeats, with the state it left the run in."""
    lines, packet = [], None
    for event in events:
        packet = apply(packet, event)
        if event.type != "heartbeat":
            lines.append(HistoryLine(seq=event.seq, at=event.at, actor=event.actor,
                                     event=event.type, state=packet.state.value,
                                     gist=_gist(event)))
    return lines


def _gist(event: Event) -> str:
    data = event.data
    if isinstance(data, Claimed):
        return f"epoch {data.epoch}" + (f", took over from {data.took_over_from}"
                                        if data.took_over_from else "")
    detail = getattr(data, "detail", None)
    if detail:
        label = getattr(data, "kind", None) or getattr(data, "topic", None)
        return (f"{label}: {detail}" if label else str(detail))[:100]
    for field in ("resolution", "reason", "summary", "title"):
        value = getattr(data, field, None)
        if value:
            return str(value)[:100]
    artifact = getattr(data, "artifact", None) or getattr(data, "evidence", None)
    return str(getattr(artifact, "name", None) or getattr(artifact, "summary", ""))[:100]


def _artifact_ref(packet: Packet, name: str) -> ArtifactRef:
    artifact = packet.artifact(name)
    assert artifact is not None
    fetch = (fetch_command(packet.id, artifact.name) if artifact.stored
             else artifact.url or artifact.path or "not stored")
    return ArtifactRef(name=artifact.name, role=artifact.role.value, bytes=artifact.bytes,
                       sha256=artifact.sha256, fetch=fetch)


def _next_steps(packet: Packet) -> list[str]:
    assert packet.worker is not None
    me = ("--as", packet.worker.actor, "--epoch", str(packet.worker.epoch))
    run = packet.id
    steps = [_command("heartbeat", run, *me) + " --note TEXT   # keep doing this"]
    steps += [_command("unblock", run, b.id, *me) + " --resolution TEXT"
              for b in packet.open_blockers]
    steps += [_command("artifact", "add", run) + " PATH --role result " + shlex.join(me),
              _command("evidence", "run", run, *me) + " -- CMD",
              _command("ready", run, *me) + " --summary TEXT --artifact NAME"]
    return steps


def _command(*argv: str) -> str:
    """A `waypost` command line as a user may paste it: every value quoted for a POSIX
    shell (actors, names and ids come from users; placeholders are added unquoted)."""
    return shlex.join(["waypost", *argv])


def brief_text(b: Brief, now: datetime) -> str:
    """The brief on one screen: where the run is, what is open, what to fetch, what next."""
    took = f" (took over from {b.took_over_from})" if b.took_over_from else ""
    heard = (f"{format_duration((now - b.last_heartbeat).total_seconds())} ago"
             if b.last_heartbeat else "never")
    progress = f", {b.progress:.0%} done" if b.progress is not None else ""
    lines = [f"HANDOFF {b.run}  {b.title}",
             f"  you        {b.worker}, lease epoch {b.epoch}{took}: pass --epoch {b.epoch}",
             f"  state      {b.state}  (owner {b.owner})",
             f"  target     {b.target}" + (f"  notify {b.notify}" if b.notify else ""),
             f"  last note  {_quoted(b.last_note)} (last heartbeat {heard}{progress})",
             "  history" + (f" (heartbeats and older events not shown: {b.earlier_events}; "
                            f"all of them: {_command('log', b.run)})" if b.earlier_events
                            else "")
             + ":"]
    lines += [f"    #{h.seq:<3} {h.at:%m-%d %H:%M:%S}  {h.actor:<18} {h.event:<18} "
              f"→ {h.state:<16} {h.gist}".rstrip() for h in b.history]
    lines += _block("open blockers", [f"{x.id} {x.kind}: {x.detail}" for x in b.open_blockers])
    lines += _block("artifacts", [f"{a.name} ({a.role}, {a.bytes if a.bytes is not None else '?'}"
                                  f" B): {a.fetch}" for a in b.artifacts])
    lines += _block("evidence so far", [f"{e.id} {e.verdict} {e.assurance} {e.kind}: "
                                        f"{e.summary}" for e in b.evidence])
    lines += _block("gates still to pass at review",
                    [f"{g.name}: {g.check}" + ("" if g.required else " (optional)")
                     for g in b.gates])
    lines += _block("next", list(b.next_steps))
    return "\n".join(one_line(line) for line in lines)  # stored text never spans or drives


def _block(title: str, items: Sequence[str]) -> list[str]:
    return [f"  {title}:", *(f"    {item}" for item in items)] if items else [f"  {title}: none"]


def _quoted(note: str | None) -> str:
    return f'"{note}"' if note else "none"
