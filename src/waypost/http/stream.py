"""The board's live feed: `GET /events`, server-sent events whose `id:` is the store's
change cursor (`Store.change_cursor`), so a browser that reconnects sends it back as
`Last-Event-ID` and is told of every run that changed while it was away.

Each message (`event: runs`) names the runs changed since the last one, as the visitor may
see them (a run's token sees its run alone), with the cursor to resume from. The cursor is
store-wide and in commit order on both backends (`changes_since`), so a change committed
while nobody listened is never skipped. Every loop here is bounded: the stream polls the
store at a fixed pace, pings while idle (a dead connection is noticed), re-checks the
token (a revoked or expired token's stream is told `closed` and ends) and ends after
`LIFETIME_S`, when the browser reconnects by itself from where it was.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from litestar.response.sse import ServerSentEventMessage

from waypost.errors import Refused
from waypost.inputs import whole
from waypost.model import Packet
from waypost.store import Store

POLL_S: Final = 0.25  # how often the store is asked for changes
PING_S: Final = 15.0  # an idle stream says something this often
RECHECK_S: Final = 5.0  # how often the token is checked again
TICK_S: Final = 30.0  # how often the page is told to refresh what time changes (liveness, age)
LIFETIME_S: Final = 3600.0  # then the stream ends and the browser reconnects
RETRY_MS: Final = 1000  # how long the browser waits before reconnecting
BATCH: Final = 500  # runs per message at most
MAX_CURSOR: Final = 2**63 - 1
T = TypeVar("T")
_closing = threading.Event()


def close_all() -> None:
    """End every open stream at its next poll (the server is stopping): a browser then
    reconnects with its Last-Event-ID, where a graceful shutdown would otherwise wait for
    streams that never end."""
    _closing.set()


class Offload(Protocol):
    """Runs blocking store work off the event loop (`anyio.to_thread.run_sync`)."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


def parse_cursor(text: str | None, what: str) -> int | None:
    """A cursor the client sent back (`Last-Event-ID`, `?after=`); None when absent."""
    if text is None or not text.strip():
        return None
    return whole(text, f"{what} (a change cursor)", low=0, high=MAX_CURSOR,
                 hint="reconnect without it: the board starts from now")


def start_cursor(store: Store, last_event_id: str | None, after: str | None) -> int:
    """Where a stream starts: the browser's Last-Event-ID on a reconnect (it wins), else the
    cursor the page was rendered at (`?after=`), else now. A cursor past now (from another
    store, or one restored from a backup) starts now, or it would wait for ever."""
    now = store.change_cursor()
    for text, what in ((last_event_id, "Last-Event-ID"), (after, "after")):
        cursor = parse_cursor(text, what)
        if cursor is not None:
            return min(cursor, now)
    return now


class SharedScans:
    """One change scan per cursor per poll, however many streams wait at that cursor (once
    caught up, they all do), and one read of where the feed stands per poll. A scan or a
    cursor reused for up to `fresh_s` only delays what commits after it; nothing is
    skipped, since that lies at or past the cursor the scan answered. One per server: many
    open boards cost one scan per change, not one each, and one horizon read per poll
    (on PostgreSQL that read looks at the server's locks while other transactions run)."""

    def __init__(self, fresh_s: float = POLL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fresh_s = fresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._scans: dict[tuple[int, int], tuple[float, list[Packet], int]] = {}
        self._cursors: dict[int, tuple[float, int]] = {}

    def change_cursor(self, store: Store) -> int:
        key, now = id(store), self._clock()
        with self._lock:
            hit = self._cursors.get(key)
        if hit is not None and now - hit[0] < self._fresh_s:
            return hit[1]
        cursor = store.change_cursor()
        with self._lock:
            self._cursors[key] = (now, cursor)
        return cursor

    def changes_since(self, store: Store, cursor: int) -> tuple[list[Packet], int]:
        key, now = (id(store), cursor), self._clock()
        with self._lock:
            hit = self._scans.get(key)
        if hit is not None and now - hit[0] < self._fresh_s:
            return hit[1], hit[2]
        packets, after = store.changes_since(cursor, limit=BATCH)
        with self._lock:  # keep only fresh scans: as many as cursors being waited at
            self._scans = {k: v for k, v in self._scans.items() if now - v[0] < self._fresh_s}
            self._scans[key] = (now, packets, after)
        return packets, after


@dataclass(frozen=True)
class Batch:
    message: ServerSentEventMessage | None  # None: nothing new at all
    cursor: int  # where the next batch starts


def next_batch(store: Store, cursor: int, visible: Callable[[Iterable[Packet]], list[Packet]],
               scans: SharedScans | None = None) -> Batch:
    """The runs changed since `cursor` that the visitor may see, as one `runs` message
    whose id is the cursor after them. Changes the visitor may not see still move the id
    on (a message with an id and no data), so a reconnect does not scan them again. The
    horizon is asked first: a cheap read, where the change scan is not."""
    now = scans.change_cursor(store) if scans is not None else store.change_cursor()
    if now <= cursor:
        return Batch(message=None, cursor=cursor)
    packets, after = (scans.changes_since(store, cursor) if scans is not None
                      else store.changes_since(cursor, limit=BATCH))
    if after == cursor and not packets:
        return Batch(message=None, cursor=cursor)
    shown = visible(packets)
    if not shown:
        return Batch(message=ServerSentEventMessage(data=None, id=after), cursor=after)
    runs = [{"id": p.id, "state": str(p.state), "version": p.version} for p in shown]
    return Batch(message=ServerSentEventMessage(
        event="runs", id=after, data=json.dumps({"cursor": after, "runs": runs})),
        cursor=after)


@dataclass(frozen=True)
class Feed:
    """What one stream needs, each store call run off the event loop by `call`."""

    store: Store
    visible: Callable[[Iterable[Packet]], list[Packet]]
    still_allowed: Callable[[], None]  # raises Refused once the token is revoked or expired
    call: Offload
    sleep: Callable[[float], Awaitable[None]]
    clock: Callable[[], float] = time.monotonic
    closing: Callable[[], bool] = _closing.is_set  # the server is stopping
    scans: SharedScans | None = None  # shared with the server's other streams


async def messages(feed: Feed, cursor: int, *,
                   lifetime: float = LIFETIME_S) -> AsyncIterator[ServerSentEventMessage]:
    """The stream from `cursor`: `runs` messages as changes commit, a `tick` now and then
    (liveness and age move with time alone), pings while idle, and `closed` (then the end)
    once the token no longer counts."""
    yield ServerSentEventMessage(comment="waypost board", retry=RETRY_MS, data=None)
    started = checked = said = ticked = feed.clock()
    while feed.clock() - started < lifetime and not feed.closing():
        if feed.clock() - checked >= RECHECK_S:
            if not await feed.call(lambda: _allowed(feed)):
                yield ServerSentEventMessage(event="closed", data="the token was revoked or "
                                             "has expired: sign in again")
                return
            checked = feed.clock()
        batch = await feed.call(functools.partial(next_batch, feed.store, cursor,
                                                  feed.visible, feed.scans))
        cursor = batch.cursor
        if batch.message is not None:
            yield batch.message
            said = feed.clock()
        elif feed.clock() - ticked >= TICK_S:
            yield ServerSentEventMessage(event="tick", data="time moved")
            said = ticked = feed.clock()
        elif feed.clock() - said >= PING_S:
            yield ServerSentEventMessage(comment="ping", data=None)
            said = feed.clock()
        await feed.sleep(POLL_S)


def _allowed(feed: Feed) -> bool:
    try:
        feed.still_allowed()
    except Refused:
        return False
    return True
