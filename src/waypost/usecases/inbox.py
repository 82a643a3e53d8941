"""An owner's inbox: what happened on the runs an actor owns since it last acknowledged.

The items are the runs' own events (`core.inbox` decides which, for which reader), so the
inbox is the ledger a lost notice is recovered from: every event that plans a notice or the
final delivery is committed in the same transaction as the plan. Only each reader's marks
are stored: *shown* (a new session's start told it, once: `while_away`) and *acknowledged*
(`waypost inbox --ack`, `POST /api/inbox/ack`, the `inbox` tool with `ack`); an item stays
listed until acknowledged, however often it was shown.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import msgspec

from waypost import inputs
from waypost.core import inbox as rule
from waypost.core.inbox import Item
from waypost.display import one_line
from waypost.errors import NotFound
from waypost.model import Record

if TYPE_CHECKING:
    from waypost.store.base import Store

MAX_TOLD = 20  # items a session's start tells at most (the rest: `waypost inbox`)


class Inbox(Record, frozen=True, kw_only=True):
    """A reader's inbox as one answer listed it."""

    reader: str
    items: tuple[Item, ...]  # oldest first
    acknowledged: bool  # this answer acknowledged every item it lists
    more: bool  # more items wait past these (acknowledge these to see them)


def read(store: Store, reader: str, *, ack: bool = False) -> Inbox:
    """The reader's items not yet acknowledged; with `ack`, acknowledged now (exactly
    those listed: an item that arrives meanwhile stays)."""
    reader = inputs.name(reader, "reader")
    found = store.inbox_events(reader, types=rule.TYPES, limit=rule.MAX_ITEMS)
    items = _titled(store, rule.items(found, reader))
    if ack and items:
        store.mark_inbox(reader, rule.marks(items), acked=True)
    return Inbox(reader=reader, items=tuple(items), acknowledged=ack,
                 more=len(found) >= rule.MAX_ITEMS)


def while_away(store: Store, reader: str) -> str | None:
    """A new session's news for its reader: the items never shown, told once (they are
    marked shown now, and stay in the inbox until acknowledged); None: nothing new."""
    inbox = read(store, reader)
    fresh = [i for i in inbox.items if not i.shown]
    if not fresh:
        return None
    told = fresh[:MAX_TOLD]
    store.mark_inbox(reader, rule.marks(told), acked=False)
    more = len(fresh) - len(told)
    lines = [f"waypost: while you were gone ({reader}'s runs):", *map(line, told)]
    if more or inbox.more:
        lines.append("  … and more: waypost inbox")
    lines.append(f"acknowledge them with: waypost inbox --ack --as {shlex.quote(reader)}")
    return "\n".join(lines)


def line(item: Item) -> str:
    """One item in one line."""
    title = f" ({item.title})" if item.title else ""
    return one_line(f"  {item.at:%Y-%m-%d %H:%M:%S}Z {item.run_id}{title} {item.topic}"
                    f" #{item.seq} by {item.actor}: {item.detail}", limit=600)


def text(inbox: Inbox) -> str:
    """The inbox as a person reads it."""
    if not inbox.items:
        return f"inbox of {inbox.reader}: nothing new"
    said = "acknowledged" if inbox.acknowledged else "not yet acknowledged"
    lines = [f"inbox of {inbox.reader}: {len(inbox.items)} item(s), {said}",
             *map(line, inbox.items)]
    if inbox.more:
        lines.append("  … and more: acknowledge these to see the rest")
    elif not inbox.acknowledged:
        lines.append("acknowledge them with: waypost inbox --ack --as "
                     + shlex.quote(inbox.reader))
    return "\n".join(lines)


def _titled(store: Store, items: list[Item]) -> list[Item]:
    titles: dict[str, str] = {}
    for run_id in dict.fromkeys(i.run_id for i in items):
        try:
            titles[run_id] = store.get(run_id).title
        except NotFound:  # pruned meanwhile
            titles[run_id] = ""
    return [msgspec.structs.replace(i, title=titles[i.run_id]) for i in items]
