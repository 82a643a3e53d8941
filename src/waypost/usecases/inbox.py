"""An owner's inbox: what happened on the runs an actor owns since it last acknowledged.

The items are the runs' own events (`core.inbox` decides which, for which reader), so the
inbox is the ledger a lost notice is recovered from: every event that plans a notice or the
final delivery is committed in the same transaction as the plan. Only each reader's marks
are stored: *shown* (a new session's start told it, once: `while_away`) and *acknowledged*
(`waypost inbox --ack`, `POST /api/inbox/ack`, the `inbox` tool with `ack`); an item stays
listed until acknowledged, however often it was shown.

On an authenticated door the reader is the token's holder (`caller`): its items are those
of the runs its token may read, as the read model shows them (`core.readers`: a viewer's
token sees no private summary, even its owner's). On a local store the reader is
self-asserted, as everywhere on it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from waypost import inputs
from waypost.config import Config
from waypost.core import access, readers
from waypost.core import inbox as rule
from waypost.core.inbox import InboxItem
from waypost.core.sanitize import redact
from waypost.display import one_line
from waypost.errors import NotFound, step
from waypost.model import Packet, Record
from waypost.usecases.commands import command

if TYPE_CHECKING:
    from waypost.core.access import Caller
    from waypost.events import Event
    from waypost.store.base import Store

NO_CONFIG = Config()
MAX_TOLD = 20  # items a session's start tells at most (the rest: `waypost inbox`)


class Inbox(Record, frozen=True, kw_only=True):
    """A reader's inbox as one answer listed it."""

    reader: str
    items: tuple[InboxItem, ...]  # oldest first
    acknowledged: bool  # this answer acknowledged every item it lists
    more: bool  # more items wait past these (acknowledge these to see them)


def read(store: Store, reader: str, *, ack: bool = False, caller: Caller | None = None,
         config: Config = NO_CONFIG) -> Inbox:
    """The reader's items not yet acknowledged; with `ack`, acknowledged now (exactly
    those listed: an item that arrives meanwhile stays). `caller`: the token of an
    authenticated door, whose holder must be the reader; `config`: the project's
    `[sanitize]` terms, for what a reader of the public view sees."""
    reader = inputs.name(reader, "reader")
    scan = store.inbox_events(reader, types=rule.TYPES, limit=rule.MAX_ITEMS)
    packets = _packets(store, {e.run_id for e, _ in scan.events})
    seen = _seen(scan.events, packets, caller, config)
    items = [msgspec.structs.replace(i, title=_title(packets[i.run_id], caller, config))
             for i in rule.items(seen, reader)]
    more = len(scan.events) >= rule.MAX_ITEMS
    if ack:
        store.mark_inbox(reader, _acknowledged(items, scan.versions, caller, more=more),
                         acked=True)
    return Inbox(reader=reader, items=tuple(items), acknowledged=ack, more=more)


def _acknowledged(items: list[InboxItem], versions: dict[str, int], caller: Caller | None,
                  *, more: bool) -> dict[str, int]:
    """The marks an acknowledgement sets: each listed item's; and, when nothing was left
    out, each run the reader may read up to the version read before its events (what
    lies below it was all considered: the rest of it is no news), so the next read passes
    over a finished run at once."""
    marks = rule.marks(items)
    if more:
        return marks
    for run_id, version in versions.items():
        if caller is None or access.in_scope(caller, run_id):
            marks[run_id] = max(marks.get(run_id, 0), version)
    return marks


def while_away(store: Store, reader: str, *, caller: Caller | None = None,
               config: Config = NO_CONFIG) -> str | None:
    """A new session's news for its reader: the items never shown, told once (they are
    marked shown now, and stay in the inbox until acknowledged); None: nothing new.
    `caller` and `config` as `read` takes them."""
    inbox = read(store, reader, caller=caller, config=config)
    fresh = [i for i in inbox.items if not i.shown]
    if not fresh:
        return None
    told = fresh[:MAX_TOLD]
    store.mark_inbox(reader, rule.marks(told), acked=False)
    more = len(fresh) - len(told)
    lines = [f"waypost: while you were gone ({reader}'s runs):", *(line(i, reader) for i in told)]
    if more or inbox.more:
        lines.append("  … and more: waypost inbox")
    lines.append(f"acknowledge them with: waypost inbox --ack --as {shlex.quote(reader)}")
    return "\n".join(lines)


def line(item: InboxItem, reader: str | None = None) -> str:
    """One item in one line."""
    title = f" ({item.title})" if item.title else ""
    said = one_line(f"  {item.at:%Y-%m-%d %H:%M:%S}Z {item.run_id}{title} {item.topic}"
                    f" #{item.seq} by {item.actor}: {item.detail}", limit=600)
    if item.topic == "ready_for_review" and reader is not None:  # the owner's next command
        said += "\n    next: " + command(step("review", item.run_id, actor=reader))
    return said


def text(inbox: Inbox) -> str:
    """The inbox as a person reads it."""
    if not inbox.items:
        return f"inbox of {inbox.reader}: nothing new"
    said = "acknowledged" if inbox.acknowledged else "not yet acknowledged"
    lines = [f"inbox of {inbox.reader}: {len(inbox.items)} item(s), {said}",
             *(line(i, inbox.reader) for i in inbox.items)]
    if inbox.more:
        lines.append("  … and more: acknowledge these to see the rest")
    elif not inbox.acknowledged:
        lines.append("acknowledge them with: waypost inbox --ack --as "
                     + shlex.quote(inbox.reader))
    return "\n".join(lines)


def _packets(store: Store, run_ids: set[str]) -> dict[str, Packet]:
    """The packets of the runs listed (one read each, `MAX_ITEMS` at most); a run pruned
    meanwhile is left out, and its items with it."""
    found = {}
    for run_id in sorted(run_ids):
        try:
            found[run_id] = store.get(run_id)
        except NotFound:
            continue
    return found


def _title(packet: Packet, caller: Caller | None, config: Config) -> str:
    """The run's title as `caller` may see it (sanitized in the public view)."""
    if caller is None or readers.sight(caller, packet) is readers.Sight.ALL:
        return packet.title
    return redact(packet.title, deny=config.deny, allow=config.allow)


def _seen(found: Sequence[tuple[Event, int]], packets: dict[str, Packet], caller: Caller | None,
          config: Config) -> list[tuple[Event, int]]:
    """The events found, as `caller` may see them (all of them on a local store)."""
    kept = [(e, shown) for e, shown in found if e.run_id in packets]
    if caller is None:
        return kept
    may = {p.id for p in access.visible(caller, packets.values())}
    return [(readers.events_seen([e], readers.sight(caller, packets[e.run_id]),
                                 deny=config.deny, allow=config.allow, fold=True)[0], shown)
            for e, shown in kept if e.run_id in may]
