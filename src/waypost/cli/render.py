"""Packets for people: the terminal view, Markdown, the board table and the event log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from waypost.core import observed
from waypost.durations import format_duration
from waypost.events import Event
from waypost.model import Evidence, Packet, Review


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment else "-"


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "never"
    return f"{format_duration((now - moment).total_seconds())} ago"


def _evidence_line(e: Evidence) -> str:
    extra = f" — reason: {e.reason}" if e.reason and e.reason not in e.summary else ""
    gate = f" [gate {e.gate}" + (f", review {e.review}]" if e.review else "]") if e.gate else ""
    return f"{e.id} {e.verdict:<7} {e.assurance:<9} {e.kind:<10} {e.summary}{extra}{gate}"


def _review_tally(packet: Packet, review: Review) -> str:
    verdicts = [e.verdict for e in packet.evidence if e.review == review.id]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    return f"{review.id} by {review.by} at {_when(review.at)}: {counts or 'no gates'}"


def _approval_lines(packet: Packet) -> list[str]:
    """Reviews, the approval and every waiver: a waiver stays on show for good."""
    lines = _section("reviews", [_review_tally(packet, r) for r in packet.reviews])
    approval = packet.approval
    if approval is not None:
        lines.append(f"  approved   by {approval.by} at {_when(approval.at)}")
        lines += [f"  WAIVED     gate {w.gate} by {w.by} at {_when(w.at)}: {w.reason}"
                  for w in approval.waivers]
    return lines


def show_text(packet: Packet, now: datetime) -> str:
    """The terminal view: where are we, who is on it, what is open, what was proven."""
    lines = [f"{packet.id}  {packet.title}",
             f"  state      {packet.state}  ({packet.kind}, version {packet.version})"]
    obs = packet.observed
    if obs is not None:
        quiet = f", quiet for {format_duration(obs.silent_for_s)}" if obs.silent_for_s else ""
        lines.append(f"  liveness   {obs.liveness or 'not measured'}{quiet}")
        lines.append(f"  watch      {obs.watch}")
        lines.append(f"  delivery   {obs.delivery}")
    worker = packet.worker
    lines.append(f"  owner      {packet.owner}")
    lines.append("  worker     " + (f"{worker.actor} (epoch {worker.epoch}, lease until "
                                    f"{_when(worker.expires_at)})" if worker else "none"))
    lines.append(f"  target     {packet.target}" + (f"  notify {packet.notify}"
                                                    if packet.notify else ""))
    lines.extend(_rules_lines(packet))
    p = packet.progress
    fraction = f" {p.fraction:.0%}" if p.fraction is not None else ""
    lines.append(f"  progress  {fraction} last heartbeat {_ago(p.last_heartbeat, now)}"
                 + (f': "{p.note}"' if p.note else ""))
    lines.extend(_section("blockers", [
        f"{b.id} {'OPEN' if b.is_open else 'resolved'} {b.kind}: {b.detail}"
        + (f" → {b.resolution}" if b.resolution else "") for b in packet.blockers]))
    lines.extend(_section("artifacts", [
        f"{a.name} ({a.role}) {a.bytes if a.bytes is not None else '?'} B "
        f"{(a.sha256 or '')[:12]} {a.url or a.path or ''}" for a in packet.artifacts]))
    lines.extend(_section("evidence", [_evidence_line(e) for e in packet.evidence]))
    lines.extend(_section("gates", [f"{g.name}: {g.check}" + ("" if g.required else
                                                               " (optional)")
                                    for g in packet.gates]))
    if packet.result:
        lines.append(f"  result     {packet.result.summary}")
        if packet.result.public_summary:
            lines.append(f"  public     {packet.result.public_summary}")
    lines.extend(_section("changes requested",
                          [f"{c.reason} ({c.by}, {_when(c.at)})" for c in packet.change_requests]))
    lines.extend(_section("owner nudged", [f"{n.topic}: {n.detail} ({n.by}, {_when(n.at)})"
                                           for n in packet.nudges]))
    lines.extend(_approval_lines(packet))
    if obs is not None:
        lines.extend(_section("deliveries", [observed.row(d, now)
                                             for d in obs.deliveries]))
    if packet.cancel_reason:
        lines.append(f"  cancelled  {packet.cancel_reason}")
    return "\n".join(lines)


def _rules_lines(packet: Packet) -> list[str]:
    r = packet.stop_rules
    parts = []
    if r.heartbeat_interval is not None:
        parts.append(f"heartbeat every {format_duration(r.heartbeat_interval)}")
    if r.max_silence is not None:
        parts.append(f"silent after {format_duration(r.max_silence)}")
    if r.deadline is not None:
        parts.append(f"deadline {_when(r.deadline)}")
    return [f"  stop rules {', '.join(parts)}"] if parts else ["  stop rules none"]


def _section(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return [f"  {title}:"] + [f"    {item}" for item in items]


def show_markdown(packet: Packet, now: datetime) -> str:
    out = [f"# {packet.title}", "",
           f"- **run** `{packet.id}` · **state** `{packet.state}` · **kind** {packet.kind}",
           f"- **owner** {packet.owner} · **worker** "
           + (f"{packet.worker.actor} (epoch {packet.worker.epoch})" if packet.worker
              else "none"),
           f"- **target** `{packet.target}`"]
    if packet.observed:
        out.append(f"- **watch** {packet.observed.watch}")
        out.append(f"- **delivery** {packet.observed.delivery}")
    if packet.progress.note:
        out.append(f"- **last note** {packet.progress.note} "
                   f"({_ago(packet.progress.last_heartbeat, now)})")
    if packet.blockers:
        out += ["", "## Blockers", "", "| id | state | kind | detail |", "|---|---|---|---|"]
        out += [f"| {b.id} | {'open' if b.is_open else 'resolved'} | {b.kind} | {b.detail} |"
                for b in packet.blockers]
    if packet.artifacts:
        out += ["", "## Artifacts", "", "| name | role | bytes | sha256 |", "|---|---|---|---|"]
        out += [f"| {a.name} | {a.role} | {a.bytes if a.bytes is not None else ''} | "
                f"`{(a.sha256 or a.url or '')[:16]}` |" for a in packet.artifacts]
    if packet.evidence:
        out += ["", "## Evidence", "", "| id | verdict | assurance | kind | summary |",
                "|---|---|---|---|---|"]
        out += [f"| {e.id} | {e.verdict} | {e.assurance} | {e.kind} | "
                f"{(e.summary + (' — ' + e.reason if e.reason else '')).replace('|', '/')} |"
                for e in packet.evidence]
    if packet.result:
        out += ["", "## Result", "", packet.result.summary]
    if packet.reviews or packet.approval:
        out += ["", "## Review", ""] + [f"- {line.strip()}" for line in _approval_lines(packet)
                                        if line.strip() != "reviews:"]
    return "\n".join(out) + "\n"


def board(packets: Sequence[Packet], now: datetime) -> str:
    if not packets:
        return "no runs"
    rows = [("RUN", "STATE", "OWNER", "WORKER", "HEARD", "WATCH", "DELIVERY", "TITLE")]
    for p in packets:
        watch = "-"
        if p.observed:
            watched_by = p.observed.watched_by
            watch = f"watched by {watched_by}" if watched_by else p.observed.watch.split(":")[0]
        rows.append((p.id, p.state.value, p.owner, p.worker.actor if p.worker else "-",
                     _ago(p.progress.last_heartbeat, now), watch,
                     observed.short(p, p.observed.deliveries if p.observed else ()),
                     p.title[:50]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
                     for r in rows)


def event_log(events: Sequence[Event]) -> str:
    lines = []
    for e in events:
        epoch = f" epoch {e.epoch}" if e.epoch is not None else ""
        lines.append(f"{e.seq:>4}  {_when(e.at)}  {e.actor}{epoch}  {e.type}  "
                     f"{_event_gist(e)}")
    return "\n".join(lines)


def _event_gist(event: Event) -> str:
    data = event.data
    for field in ("detail", "reason", "resolution", "note", "summary", "title"):
        value = getattr(data, field, None)
        if value:
            return str(value)[:80]
    for field in ("artifact", "evidence"):
        value = getattr(data, field, None)
        if value is not None:
            return str(getattr(value, "name", None) or getattr(value, "summary", ""))[:80]
    return ""
