"""What the board shows, as plain records: pure, no I/O, no Litestar.

Every string a run holds is someone's input. Each passes through `waypost.display` here
(`one_line` for a field that keeps to its line, `printable` for one that may span lines),
and the templates escape it again for HTML (Jinja2 autoescape): a title can neither run a
script nor reverse the text around it. Liveness, watch coverage and delivery come from the
observed view (`waypost.core.observed`, filled in by `waypost.usecases.views`); which gates are
unmet from `waypost.core.gates`: nothing here decides a rule.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final
from urllib.parse import urlencode

from waypost import errors
from waypost.core import observed
from waypost.core.gates import current_review, unmet, verdicts
from waypost.core.inbox import InboxItem, Topic
from waypost.core.reviewed import shown
from waypost.display import one_line, printable
from waypost.durations import format_duration
from waypost.events import Event
from waypost.http.board_story import PreviewView, badge, preview_view, sentence
from waypost.model import TERMINAL, Artifact, Packet, State
from waypost.usecases.commands import command
from waypost.usecases.previews import Preview
from waypost.usecases.views import ago, when

STATE_ORDER = (State.IN_PROGRESS, State.BLOCKED, State.READY_FOR_REVIEW, State.APPROVED,
               State.DELIVERED, State.CANCELLED)
# what the run page may offer
OWNER_ACTIONS = ("unblock", "adopt", "review", "approve", "changes", "transfer", "cancel")
TITLE_WIDTH = 120  # characters of a title in a board row
NOTE_WIDTH = 160  # characters of the last note in a board row
FILTER_WIDTH = 200  # characters of a filter's value at most
MAX_NEEDS = 50  # runs "needs you" lists at most (the rest: `waypost inbox`)
FILTERS = ("owner", "state", "worker", "q", "before")
RUN_ID = re.compile(r"wp_[0-9a-z]{1,61}")
TIMELINE_EVENTS = 200  # events on the run page at once; "show earlier" pages back
EVIDENCE_SHOWN = 100  # the latest evidence items on the run page (the API lists them all)


def cut(text: str, width: int) -> str:
    """One line of at most `width` characters, `…` where it was cut."""
    shown = one_line(text[: width * 4 + 8], limit=None)
    if len(shown) > width or len(text) > width * 4 + 8:
        shown = shown[: width - 1] + "…"
    return shown


# --- the board: one row per run, grouped by state -------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    title: str
    state: str
    kind: str
    owner: str
    worker: str
    liveness: str  # fresh / late / silent / not measured
    quiet: str  # how long since the last sign of life ("" when not measured)
    watch: str  # "watched by W" / "unwatched" / "bounded" / "finished"
    watch_detail: str  # the observed view's whole watch line
    blockers: tuple[str, ...]  # the open blockers, "kind: detail"
    delivery: str  # the short delivery cell (queued, retrying (3), delivered, FAILED …)
    delivery_detail: str  # the observed view's whole delivery line
    age: str  # since the run started
    updated: str  # since its last change
    progress: str = ""  # "40%" when the worker said so
    note: str = ""  # the worker's last note
    receipt: str = ""  # the delivery receipt's assurance, once delivered


@dataclass(frozen=True)
class Group:
    state: str
    rows: tuple[Row, ...]


def row(packet: Packet, now: datetime) -> Row:
    """One board row from a packet with its observed view (`views.observe_runs`)."""
    obs = packet.observed
    deliveries = obs.deliveries if obs is not None else ()
    liveness = "not measured"
    quiet = ""
    if obs is not None and obs.liveness is not None:
        liveness = str(obs.liveness)
        if obs.silent_for_s is not None:
            quiet = f"quiet {format_duration(obs.silent_for_s)}"
    return Row(id=packet.id, title=cut(packet.title, TITLE_WIDTH), state=str(packet.state),
               kind=str(packet.kind), owner=one_line(packet.owner),
               worker=one_line(packet.worker.actor) if packet.worker else "-",
               liveness=liveness, quiet=quiet, watch=_watch_cell(packet),
               watch_detail=one_line(obs.watch) if obs else "",
               blockers=tuple(f"{b.kind}: {one_line(b.detail)}" for b in packet.open_blockers),
               delivery=observed.short(packet, deliveries),
               delivery_detail=one_line(obs.delivery) if obs else "",
               age=format_duration(max(0.0, (now - packet.created_at).total_seconds())),
               updated=ago(packet.updated_at, now),
               progress=f"{packet.progress.fraction:.0%}"
               if packet.progress.fraction is not None else "",
               note=cut(packet.progress.note or "", NOTE_WIDTH),
               receipt=str(packet.receipt.assurance or "recorded")
               if packet.receipt is not None else "")


def _watch_cell(packet: Packet) -> str:
    obs = packet.observed
    if obs is None:
        return "-"
    if obs.watched_by:
        return f"watched by {one_line(obs.watched_by)}"
    return one_line(obs.watch.split(":")[0])  # unwatched / bounded / finished


def board(packets: Sequence[Packet], now: datetime) -> tuple[Group, ...]:
    """The runs grouped by state in the order work moves; an empty state is left out."""
    by_state: dict[State, list[Row]] = {}
    for packet in packets:
        by_state.setdefault(packet.state, []).append(row(packet, now))
    return tuple(Group(state=str(s), rows=tuple(by_state[s])) for s in STATE_ORDER
                 if s in by_state)


# --- filters: in the URL, so a board can be shared ------------------------------------


@dataclass(frozen=True)
class Filters:
    owner: str = ""
    state: str = ""
    worker: str = ""
    q: str = ""  # text in the title, as the reader sees it
    before: str = ""  # the paging cursor: runs started before this run id

    @property
    def active(self) -> bool:
        return bool(self.owner or self.state or self.worker or self.q)

    def query(self, **changed: str) -> str:
        """This board's URL query with `changed` (empty values left out)."""
        fields = {**{k: getattr(self, k) for k in FILTERS}, **changed}
        said = urlencode({k: v for k, v in fields.items() if v})
        return f"?{said}" if said else ""

    def states(self) -> list[State] | None:
        return [State(self.state)] if self.state else None

    def keeps(self, packet: Packet) -> bool:
        """The filters the store does not apply (worker, text), over the packet as its
        reader sees it (a text never finds what the reader's view withholds)."""
        worker = packet.worker.actor if packet.worker else ""
        return ((not self.worker or worker == self.worker)
                and (not self.q or self.q.casefold() in packet.title.casefold()))


def filters(params: Mapping[str, Sequence[str]]) -> Filters:
    """The board's query parameters, decided: each at most once, within its width, a
    known state, a run id as the cursor (InvalidInput otherwise: a 400 page)."""
    given: dict[str, str] = {}
    for key in FILTERS:
        values = list(params.get(key, ()))
        if len(values) > 1:
            raise errors.InvalidInput(f"the filter {key} is given {len(values)} times",
                                      hint=f"give {key} once")
        value = values[0].strip() if values else ""
        if len(value) > FILTER_WIDTH or one_line(value, limit=None) != value:
            raise errors.InvalidInput(f"the filter {key} is not a short line of text",
                                      hint=f"at most {FILTER_WIDTH} printable characters")
        given[key] = value
    if given["state"] and given["state"] not in {str(s) for s in STATE_ORDER}:
        raise errors.InvalidInput(f"no state is called {given['state']!r}",
                                  hint=", ".join(str(s) for s in STATE_ORDER))
    if given["before"] and not RUN_ID.fullmatch(given["before"]):
        raise errors.InvalidInput("the page cursor is not a run id",
                                  hint="follow the board's own 'older runs' link")
    return Filters(**given)


# --- "needs you": the visitor's inbox, on top -------------------------------------------


@dataclass(frozen=True)
class Need:
    run_id: str
    title: str
    topic: str  # the inbox's topic (core.inbox)
    detail: str
    at: str
    action: str  # the one thing to do, in words ("" when this visitor may not act)
    href: str  # where it is done on the board
    command: str  # or in a terminal


NEED_ACTIONS: Final = {  # topic: (words, the run page's section, the command's verb)
    Topic.READY_FOR_REVIEW: ("review the result", "actions", "review"),
    Topic.BLOCKED: ("resolve the blocker", "actions", "unblock"),
    Topic.SILENT: ("look at the silent worker", "run", "read"),
    Topic.NUDGED: ("look at the reminder", "run", "read"),
    Topic.DELIVERED: ("read the receipt", "run", "read"),
    Topic.DELIVERY_FAILED: ("look at the failed delivery", "run", "read"),
    Topic.CANCELLED: ("read why it stopped", "run", "read"),
}


def needs(items: Iterable[InboxItem], reader: str, may_act: Collection[str]) -> tuple[Need, ...]:
    """The inbox's items as "needs you" rows: the latest item of each run, newest first,
    each with its action where the visitor may act on that run (`may_act`: the run ids the
    access rules let it answer; a viewer's are none)."""
    latest: dict[str, InboxItem] = {}
    for item in items:
        latest[item.run_id] = item
    chosen = sorted(latest.values(), key=lambda i: i.at, reverse=True)[:MAX_NEEDS]
    shown = []
    for item in chosen:
        words, section, verb = NEED_ACTIONS[item.topic]
        acts = item.run_id in may_act
        shown.append(Need(
            run_id=item.run_id, title=cut(item.title or item.run_id, TITLE_WIDTH),
            topic=str(item.topic).replace("_", " "), detail=cut(item.detail, NOTE_WIDTH),
            at=when(item.at), action=words if acts else "",
            href=f"/runs/{item.run_id}#{section}",
            command=command(errors.step(verb, item.run_id, actor=reader)) if acts else ""))
    return tuple(shown)


def older(packets: Sequence[Packet], more: bool, now_filters: Filters) -> str:
    """The next page's query ("" on the last page)."""
    return now_filters.query(before=packets[-1].id) if more and packets else ""


# --- the run page ----------------------------------------------------------------------


@dataclass(frozen=True)
class Moment:
    seq: int
    at: str
    actor: str
    type: str
    said: str  # the event as a sentence (`board_story`)
    tone: str  # note / blocker / answer / plain


@dataclass(frozen=True)
class ArtifactView:
    name: str  # as shown
    raw_name: str  # as stored: the download link quotes it
    role: str
    size: str
    sha256: str
    stored: bool  # a copy is in the store: downloadable
    url: str  # a recorded URL (shown as text, never as a link)
    recorded: str


@dataclass(frozen=True)
class EvidenceView:
    id: str
    kind: str
    verdict: str
    assurance: str
    summary: str
    reason: str
    command: str
    exit_code: str
    gate: str
    recorded: str
    badge: str  # its assurance in people's words: ran here / reported / re-checked by the owner
    output_tail: str  # the end of its output, for a reader who sees everything
    has_log: bool  # its full log is stored and this reader may fetch it


@dataclass(frozen=True)
class GateView:
    name: str
    raw_name: str  # the waiver field names it
    check: str
    required: bool
    verdict: str  # passed / failed / skipped / not reviewed
    summary: str
    waived: str  # the owner's reason, when waived
    unmet: bool  # required and neither passed nor waived: approving needs a waiver
    declared_by: str  # who declared it ("" for the built-in hash check)
    adopted_by: str  # the owner, once adopted
    awaits_adoption: bool  # another's gate that review does not run until the owner adopts it


@dataclass(frozen=True)
class BlockerView:
    id: str
    kind: str
    detail: str
    open: bool
    opened: str
    resolution: str


@dataclass(frozen=True)
class RunPage:
    row: Row
    target: str
    outcome: str
    public_summary: str
    note: str
    progress: str
    timeline: tuple[Moment, ...]
    artifacts: tuple[ArtifactView, ...]
    evidence: tuple[EvidenceView, ...]
    evidence_hidden: int  # older items not shown
    gates: tuple[GateView, ...]
    blockers: tuple[BlockerView, ...]
    change_requests: tuple[str, ...]
    waivers: tuple[str, ...]
    actions: frozenset[str] = field(default_factory=frozenset)  # what this visitor may do
    downloads: bool = True  # the visitor may fetch stored artifacts (`usecases.reading`)
    reviewed: str = ""  # the result's reviewed-result digest, which the answer forms carry
    approved: str = ""  # the digest the approval bound
    earlier: int | None = None  # the cursor of the "show earlier" link: older events exist
    previews: tuple[PreviewView, ...] = ()  # the stored artifacts as this reader sees them


def run_page(packet: Packet, events: Sequence[Event], now: datetime,
             actions: Collection[str] = (), *, downloads: bool = True,
             before: int | None = None, previews: Sequence[Preview] = ()) -> RunPage:
    """The run page: `actions` are the owner actions the visitor's token allows (decided by
    the access rules, not here), narrowed to what the run's state makes possible; the
    packet and events are as the visitor may see them (`usecases.reading`), and
    `downloads` whether it may fetch the stored artifacts."""
    result = packet.result
    latest, earlier = window(events, before)
    return RunPage(
        row=row(packet, now), target=one_line(packet.target), outcome=_outcome(packet),
        public_summary=printable(result.public_summary) if result and result.public_summary
        else "",
        note=printable(packet.progress.note or ""),
        progress=f"{packet.progress.fraction:.0%}" if packet.progress.fraction is not None
        else "",
        timeline=tuple(Moment(seq=e.seq, at=when(e.at), actor=one_line(e.actor), type=e.type,
                              said=said, tone=tone)
                       for e in latest for said, tone in [sentence(e)]),
        artifacts=tuple(_artifact(a) for a in packet.artifacts),
        evidence=tuple(EvidenceView(
            id=e.id, kind=str(e.kind), verdict=str(e.verdict), assurance=str(e.assurance),
            summary=printable(e.summary), reason=printable(e.reason or ""),
            command=one_line(e.command or ""),
            exit_code="" if e.exit_code is None else str(e.exit_code),
            gate=one_line(e.gate or ""),
            recorded=f"{one_line(e.recorded_by)}, {when(e.recorded_at)}",
            badge=badge(str(e.assurance)), output_tail=printable(e.output_tail or ""),
            has_log=downloads and e.log_sha256 is not None)
            for e in packet.evidence[-EVIDENCE_SHOWN:]),
        evidence_hidden=max(0, len(packet.evidence) - EVIDENCE_SHOWN),
        gates=_gates(packet),
        blockers=tuple(BlockerView(
            id=b.id, kind=str(b.kind), detail=printable(b.detail), open=b.is_open,
            opened=f"{one_line(b.opened_by)}, {when(b.opened_at)}",
            resolution=printable(b.resolution or "")) for b in packet.blockers),
        change_requests=tuple(f"{one_line(c.reason)} ({one_line(c.by)}, {when(c.at)})"
                              for c in packet.change_requests),
        waivers=tuple(f"gate {one_line(w.gate)} waived by {one_line(w.by)} at {when(w.at)}: "
                      f"{one_line(w.reason)}" for w in
                      (packet.approval.waivers if packet.approval else ())),
        actions=possible(packet, actions), downloads=downloads,
        reviewed=shown(packet) or "",
        approved=packet.approval.reviewed or "" if packet.approval else "",
        earlier=earlier, previews=tuple(preview_view(p) for p in previews))


def window(events: Sequence[Event], before: int | None) -> tuple[list[Event], int | None]:
    """The latest TIMELINE_EVENTS events before the cursor `before` (a seq; None: the
    newest), newest last, and the cursor of the page before them (None: no earlier one)."""
    kept = [e for e in events if before is None or e.seq < before]
    latest = kept[-TIMELINE_EVENTS:]
    return latest, (latest[0].seq if len(kept) > len(latest) else None)


def possible(packet: Packet, allowed: Collection[str]) -> frozenset[str]:
    """The allowed owner actions the run's state offers: review, approve and changes while
    it waits for review; cancel and transfer until it is finished; unblock while a blocker
    is open; adopt while a gate awaits the owner's adoption, until approval. (The use
    cases decide again.)"""
    offered = set()
    if packet.open_blockers:
        offered.add("unblock")
    if packet.state is State.READY_FOR_REVIEW:
        offered |= {"review", "approve", "changes"}
    if packet.state not in TERMINAL:
        offered |= {"cancel", "transfer"}
    if packet.approval is None and packet.state not in TERMINAL and any(
            v.awaits_adoption for v in verdicts(packet, None)):
        offered.add("adopt")
    return frozenset(a for a in OWNER_ACTIONS if a in allowed and a in offered)


def _artifact(a: Artifact) -> ArtifactView:
    return ArtifactView(name=one_line(a.name), raw_name=a.name, role=str(a.role),
                        size="?" if a.bytes is None else f"{a.bytes} B",
                        sha256=(a.sha256 or "")[:12], stored=a.stored,
                        url=one_line(a.url or ""),
                        recorded=f"{one_line(a.recorded_by)}, {when(a.recorded_at)}")


def _gates(packet: Packet) -> tuple[GateView, ...]:
    waived = packet.approval.waivers if packet.approval else ()
    found = verdicts(packet, current_review(packet), waived)
    open_ = {v.gate for v in unmet(found)}
    return tuple(GateView(name=one_line(v.gate), raw_name=v.gate, check=one_line(v.check),
                          required=v.required,
                          verdict=str(v.verdict) if v.verdict else "not reviewed",
                          summary=one_line(v.summary), waived=one_line(v.waived or ""),
                          unmet=v.gate in open_, declared_by=one_line(v.declared_by or ""),
                          adopted_by=one_line(v.adopted_by or ""),
                          awaits_adoption=v.awaits_adoption)
                 for v in found)


def _outcome(packet: Packet) -> str:
    if packet.state is State.CANCELLED:
        return f"cancelled: {one_line(packet.cancel_reason or '(no reason recorded)')}"
    if packet.observed is not None:
        return one_line(packet.observed.delivery)
    return ""
