"""Packets for people: the terminal view, Markdown, the board table and the event log.

Every string a run holds is someone's input, so each passes through `waypost.display`
on its way out: `one_line` for a field that keeps to its line, `printable` for one that may
span lines, `md_inline`/`md_block` for Markdown. Only the JSON output (not made here) is
exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from waypost.core import observed
from waypost.display import md_block, md_inline, one_line, printable
from waypost.durations import format_duration
from waypost.events import Event
from waypost.model import TERMINAL, Evidence, Gate, Packet, Review, State
from waypost.usecases.views import ago, event_gist, when

LABEL = 10  # the width of the terminal view's labels
LOG_GIST = 80  # characters of an event's gist in `waypost log`


def _field(label: str, value: str) -> str:
    return f"  {label:<{LABEL}} {value}"


def _block(label: str, text: str) -> list[str]:
    """A field that may span lines: its later lines indented under the first."""
    first, *rest = printable(text).split("\n")
    return [_field(label, first)] + [" " * (LABEL + 3) + line for line in rest]


def _with_reason(summary: str, reason: str | None) -> str:
    """The summary, and the reason unless the summary already says it (`skipped: REASON`)."""
    return f"{summary} — reason: {reason}" if reason and reason not in summary else summary


def _evidence_line(e: Evidence) -> str:
    gate = f" [gate {e.gate}" + (f", review {e.review}]" if e.review else "]") if e.gate else ""
    return (f"{e.id} {e.verdict:<7} {e.assurance:<9} {e.kind:<10} "
            f"{one_line(_with_reason(e.summary, e.reason) + gate)}")


def _review_tally(packet: Packet, review: Review) -> str:
    verdicts = [e.verdict for e in packet.evidence if e.review == review.id]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    return f"{review.id} by {one_line(review.by)} at {when(review.at)}: {counts or 'no gates'}"


def _awaited(packet: Packet) -> str | None:
    """The digest of the result an answer is awaited for (loaded only then: `show` is hot)."""
    if packet.state is not State.READY_FOR_REVIEW:
        return None
    from waypost.core.reviewed import shown

    return shown(packet)


def _approval_lines(packet: Packet) -> list[str]:
    """Reviews, the approval and every waiver: a waiver stays on show for good; while the
    result waits for review, its reviewed-result digest (what an answer names)."""
    lines = _section("reviews", [_review_tally(packet, r) for r in packet.reviews])
    digest = _awaited(packet)
    if digest is not None:
        lines.append(_field("reviewed", f"{digest} (approve or send back with --reviewed "
                                        f"{digest.removeprefix('sha256:')[:12]})"))
    approval = packet.approval
    if approval is not None:
        bound = f", result {approval.reviewed}" if approval.reviewed else ""
        lines.append(_field("approved", f"by {one_line(approval.by)} at {when(approval.at)}"
                                        f"{bound}"))
        lines += [_field("WAIVED", f"gate {one_line(w.gate)} by {one_line(w.by)} at "
                                   f"{when(w.at)}: {one_line(w.reason)}")
                  for w in approval.waivers]
    return lines


def outcome(packet: Packet) -> str:
    """How a finished run ended: where it was delivered, or who cancelled it and why."""
    receipt = packet.receipt
    if packet.state is State.CANCELLED:
        return (f"cancelled by {one_line(packet.owner)} at {when(packet.updated_at)}: "
                f"{one_line(packet.cancel_reason or '(no reason recorded)')}")
    if receipt is None:
        return f"{packet.state} at {when(packet.updated_at)}"
    if packet.target.startswith("none:"):
        return (f"finished at {when(receipt.delivered_at)}; target none: nothing was sent, "
                "nobody was told")
    tries = f"{receipt.attempts} attempt{'s' if receipt.attempts != 1 else ''}"
    return (f"delivered to {one_line(receipt.target)} at {when(receipt.delivered_at)} "
            f"with receipt {one_line(receipt.detail)} (after {tries}; "
            f"{observed.assurance_text(receipt.assurance)})")


def show_text(packet: Packet, now: datetime) -> str:
    """The terminal view: where are we, who is on it, what is open, what was proven. A
    finished run shows its outcome instead of its liveness, lease and progress."""
    lines = [f"{packet.id}  {one_line(packet.title)}",
             _field("state", f"{packet.state}  ({packet.kind}, version {packet.version})")]
    if packet.observed is not None and (origin := packet.observed.imported) is not None:
        lines.append(_field("imported", one_line(f"read-only here: from {origin.said()}, "
                                                 f"exported {when(origin.exported_at)}")))
    lines += _now_lines(packet, now) if packet.state not in TERMINAL else _end_lines(packet)
    lines.extend(_section("blockers", [
        f"{b.id} {'OPEN' if b.is_open else 'resolved'} {b.kind}: {one_line(b.detail)}"
        + (f" → {one_line(b.resolution)}" if b.resolution else "") for b in packet.blockers]))
    lines.extend(_section("artifacts", [
        f"{one_line(a.name)} ({a.role}) {a.bytes if a.bytes is not None else '?'} B "
        f"{(a.sha256 or '')[:12]} {one_line(a.url or a.path or '')}".rstrip()
        for a in packet.artifacts]))
    lines.extend(_section("evidence", [_evidence_line(e) for e in packet.evidence]))
    lines.extend(_section("gates", [gate_line(packet, g) for g in packet.gates]))
    if packet.result:
        lines += _block("result", packet.result.summary)
        if packet.result.public_summary:
            lines += _block("public", packet.result.public_summary)
    lines.extend(_section("changes requested", [
        f"{one_line(c.reason)} ({one_line(c.by)}, {when(c.at)})"
        for c in packet.change_requests]))
    lines.extend(_section("owner nudged", [
        f"{n.topic}: {one_line(n.detail)} ({one_line(n.by)}, {when(n.at)})"
        for n in packet.nudges]))
    lines.extend(_approval_lines(packet))
    if packet.observed is not None:
        lines.extend(_section("deliveries", [one_line(observed.row(d, now))
                                             for d in packet.observed.deliveries]))
    return "\n".join(lines)


def gate_line(packet: Packet, gate: Gate) -> str:
    """`tests: command:pytest -q, declared by w1: …`, saying whether review runs it."""
    from waypost.core.gates import adopter, declared_by, runs_at_review  # only with gates

    said = (f"{one_line(gate.name)}: {one_line(gate.check)}"
            f"{'' if gate.required else ' (optional)'}, "
            f"declared by {one_line(declared_by(packet, gate))}")
    if adopter(gate):
        return f"{said}, adopted by {one_line(adopter(gate) or '')}"
    if runs_at_review(packet, gate):
        return said
    return (f"{said}: NOT run at review until the owner adopts it: waypost gate adopt "
            f"{packet.id} {_quoted(gate.name)} --as {_quoted(packet.owner)}")


def _quoted(text: str) -> str:
    import shlex

    return one_line(shlex.quote(text))


def _now_lines(packet: Packet, now: datetime) -> list[str]:
    """A live run: liveness, watch, delivery, who holds the lease, rules and progress."""
    lines = []
    obs = packet.observed
    if obs is not None:
        quiet = f", quiet for {format_duration(obs.silent_for_s)}" if obs.silent_for_s else ""
        lines.append(_field("liveness", f"{obs.liveness or 'not measured'}{quiet}"))
        lines.append(_field("watch", one_line(obs.watch)))
        lines.append(_field("delivery", one_line(obs.delivery)))
    worker = packet.worker
    lines += _parties(packet, f"{one_line(worker.actor)} (epoch {worker.epoch}, lease until "
                               f"{when(worker.expires_at)})" if worker else "none")
    lines.extend(_rules_lines(packet))
    p = packet.progress
    fraction = f"{p.fraction:.0%} " if p.fraction is not None else ""
    lines.append(_field("progress", f"{fraction}last heartbeat {ago(p.last_heartbeat, now)}"
                        + (f': "{one_line(p.note)}"' if p.note else "")))
    return lines


def _end_lines(packet: Packet) -> list[str]:
    """A finished run: its outcome, who worked on it, and the last thing it said."""
    worker = packet.worker
    lines = [_field("outcome", outcome(packet))]
    lines += _parties(packet, f"{one_line(worker.actor)} (last epoch {worker.epoch})"
                      if worker else "none")
    p = packet.progress
    if p.note:
        lines.append(_field("last note", f'"{one_line(p.note)}" at {when(p.last_heartbeat)}'))
    return lines


def _parties(packet: Packet, worker: str) -> list[str]:
    notify = f"  notify {one_line(packet.notify)}" if packet.notify else ""
    return [_field("owner", one_line(packet.owner)), _field("worker", worker),
            _field("target", one_line(packet.target) + notify)]


def _rules_lines(packet: Packet) -> list[str]:
    r = packet.stop_rules
    parts = []
    if r.heartbeat_interval is not None:
        parts.append(f"heartbeat every {format_duration(r.heartbeat_interval)}")
    if r.max_silence is not None:
        parts.append(f"silent after {format_duration(r.max_silence)}")
    if r.deadline is not None:
        parts.append(f"deadline {when(r.deadline)}")
    return [_field("stop rules", ", ".join(parts) if parts else "none")]


def _section(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return [f"  {title}:"] + [f"    {item}" for item in items]


def show_markdown(packet: Packet, now: datetime) -> str:
    """The packet as Markdown: user text is escaped, so it can only ever read as text."""
    worker = (f"{md_inline(packet.worker.actor)} (epoch {packet.worker.epoch})"
              if packet.worker else "none")
    out = [f"# {md_inline(packet.title)}", "",
           f"- **run** `{packet.id}` · **state** `{packet.state}` · **kind** {packet.kind}",
           f"- **owner** {md_inline(packet.owner)} · **worker** {worker}",
           f"- **target** {md_inline(packet.target)}"]
    if packet.observed is not None and (origin := packet.observed.imported) is not None:
        out.append(f"- **imported** read-only here: from {md_inline(origin.said())}")
    if packet.state in TERMINAL:
        out.append(f"- **outcome** {md_inline(outcome(packet))}")
    elif packet.observed:
        out.append(f"- **watch** {md_inline(packet.observed.watch)}")
        out.append(f"- **delivery** {md_inline(packet.observed.delivery)}")
    if packet.progress.note:
        out.append(f"- **last note** {md_inline(packet.progress.note)} "
                   f"({ago(packet.progress.last_heartbeat, now)})")
    out += _md_tables(packet)
    if packet.result:
        out += ["", "## Result", "", md_block(packet.result.summary)]
    if packet.reviews or packet.approval:
        out += ["", "## Review", ""] + [f"- {md_inline(line.strip())}"
                                        for line in _approval_lines(packet)
                                        if line.strip() != "reviews:"]
    return "\n".join(out) + "\n"


def _md_tables(packet: Packet) -> list[str]:
    out = []
    if packet.blockers:
        out += ["", "## Blockers", "", "| id | state | kind | detail |", "|---|---|---|---|"]
        out += [f"| {b.id} | {'open' if b.is_open else 'resolved'} | {b.kind} | "
                f"{md_inline(b.detail)} |" for b in packet.blockers]
    if packet.artifacts:
        out += ["", "## Artifacts", "", "| name | role | bytes | sha256 |", "|---|---|---|---|"]
        out += [f"| {md_inline(a.name)} | {a.role} | "
                f"{a.bytes if a.bytes is not None else ''} | "
                f"{md_inline((a.sha256 or a.url or '')[:16])} |" for a in packet.artifacts]
    if packet.evidence:
        out += ["", "## Evidence", "", "| id | verdict | assurance | kind | summary |",
                "|---|---|---|---|---|"]
        out += [f"| {e.id} | {e.verdict} | {e.assurance} | {e.kind} | "
                f"{md_inline(_with_reason(e.summary, e.reason))} |" for e in packet.evidence]
    return out


def board(packets: Sequence[Packet], now: datetime) -> str:
    if not packets:
        return "no runs"
    rows = [("RUN", "STATE", "OWNER", "WORKER", "HEARD", "WATCH", "DELIVERY", "TITLE")]
    for p in packets:
        watch = "-"
        if p.observed:
            watched_by = p.observed.watched_by
            watch = f"watched by {watched_by}" if watched_by else p.observed.watch.split(":")[0]
        rows.append((p.id, p.state.value, one_line(p.owner),
                     one_line(p.worker.actor) if p.worker else "-",
                     ago(p.progress.last_heartbeat, now), one_line(watch),
                     observed.short(p, p.observed.deliveries if p.observed else ()),
                     _cut(p.title, 50)))
    return _columns(rows)


def _columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned columns (the last one unpadded), no trailing spaces."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False))
                      + "  " + r[-1]).rstrip() for r in rows)


def _cut(text: str, width: int) -> str:
    """One line of at most `width` characters; `…` marks where it was cut."""
    head = text[: width * 4 + 8]  # enough: escaping only lengthens text
    shown = one_line(head, limit=None)
    if len(shown) > width or len(head) < len(text):
        shown = shown[: width - 1] + "…"
    return shown


def event_log(events: Sequence[Event]) -> str:
    """One row per event: seq, time, actor (and epoch), type and what it said."""
    rows = [(str(e.seq).rjust(len(str(events[-1].seq))), when(e.at),
             one_line(e.actor) + (f" epoch {e.epoch}" if e.epoch is not None else ""),
             e.type, _cut(event_gist(e.data), LOG_GIST))
            for e in events]
    return _columns(rows) if rows else ""
