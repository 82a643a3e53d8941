"""The SQLite store's write path: the one guarded write of a run's new packet and events
(`commit_one`), a page of them under guards already checked (`write_runs`), the rows
themselves (every statement runs in the caller's transaction), and group commit
(`GroupCommit`: the writes of a process's threads, one transaction and one fsync)."""

from __future__ import annotations

import sqlite3
from _thread import allocate_lock  # threading's Lock, without importing threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Generic, TypeVar, cast

from waypost.core.due import next_check_at
from waypost.core.writes import RunWrite
from waypost.errors import NotFound, StoreError, VersionConflict, WaypostError, step
from waypost.events import Event
from waypost.model import Packet, to_json
from waypost.store.base import check_moves
from waypost.store.shared import head_changed

# where a write lands in the change feed: one past the highest (the write lock makes the
# positions' order the commits' order); the index runs_change serves the max
NEXT_CHANGE = "(SELECT coalesce(max(change_pos), 0) + 1 FROM runs)"
INSERT_EVENT = ("INSERT INTO events (run_id, seq, type, at, actor, body)"
                " VALUES (?, ?, ?, ?, ?, ?)")
# a run's new version and packet, only if it is still at the version it was decided from
GUARDED_UPDATE = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
                  f" packet = ?, change_pos = {NEXT_CHANGE} WHERE id = ? AND version = ?")
# ... and only if the run's head event is still stored as the write read it, or wrote it
# (`RunWrite.head`): a head edited since is not sealed under a new event
HEAD_GUARD = (" AND (SELECT CAST(body AS BLOB) FROM events"
              " WHERE run_id = runs.id AND seq = runs.version) = ?")
# ... handing back what it left alone: the owner and the next check
GUARDED_UPDATE_RETURNING = f"{GUARDED_UPDATE} RETURNING owner, next_check_at"
GUARDED_HEAD_UPDATE_RETURNING = f"{GUARDED_UPDATE}{HEAD_GUARD} RETURNING owner, next_check_at"
# ... only if, besides, the write leaves the owner as it is and the next check where it is
# (`check_moves` false, written out: the same check, or one still ahead of `now` that
# comes no later than the write's own): a heartbeat's case. RETURNING costs more than
# the rest of the statement, and this needs none.
_STEADY = " AND owner = ? AND (next_check_at IS ? OR (next_check_at > ? AND ? >= next_check_at))"
STEADY_UPDATE = f"{GUARDED_UPDATE}{_STEADY}"
STEADY_HEAD_UPDATE = f"{GUARDED_UPDATE}{HEAD_GUARD}{_STEADY}"
# a page of writes (`write_runs`): the feed positions counted on from one read of the
# highest, as the subquery would give them row by row; and, where it must move, the next
# check in the same statement, so that the row is rewritten once, not twice
PAGE_UPDATE = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
               " packet = ?, change_pos = ? WHERE id = ? AND version = ?")
PAGE_UPDATE_CHECK = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
                     " packet = ?, next_check_at = ?, change_pos = ? WHERE id = ? AND version = ?")


def commit_one(db: sqlite3.Connection, write: RunWrite) -> None:
    """Commit one write inside the caller's transaction, under its version guard.

    The guarded UPDATE is the guard. Most writes (heartbeats) leave the owner and the
    next check as they are: the steady UPDATE sees that in its WHERE clause, so a
    heartbeat runs two statements and reads nothing back. When it changes no row, the
    write moves them, or was refused: `_update_moving` says which."""
    packet, events = write.packet, write.events
    version, state, owner, head, updated, due, body = columns(packet, events[-1])
    guarded = (version, state, head, updated, body, write.run_id, write.expected_version)
    now = packet.updated_at.timestamp()
    if write.head is None:
        steady = db.execute(STEADY_UPDATE, (*guarded, owner, due, now, due))
    else:
        steady = db.execute(STEADY_HEAD_UPDATE, (*guarded, _head(write), owner, due, now, due))
    if steady.rowcount != 1:
        _update_moving(db, write, guarded, owner, due, now)
    if len(events) == 1:  # most writes: one event, at the packet's time (written above)
        db.execute(INSERT_EVENT, event_row(events[0], updated
                                           if events[0].at is packet.updated_at else None))
    else:
        insert_events(db, events)
    if write.outbox:
        from waypost.store.sqlite import outbox as sqlite_outbox  # here: a heartbeat queues nothing

        sqlite_outbox.queue(db, write.outbox)


def _update_moving(db: sqlite3.Connection, write: RunWrite, guarded: tuple[object, ...],
                   owner: str, due: float | None, now: float) -> None:
    """The guarded UPDATE of a write that moves the owner or the next check (or is
    refused): it hands back the owner and next check it left alone, and those that must
    change are written apart (`write_runs` says why)."""
    if write.head is None:
        rows = db.execute(GUARDED_UPDATE_RETURNING, guarded).fetchall()  # to the end: done
    else:
        rows = db.execute(GUARDED_HEAD_UPDATE_RETURNING, (*guarded, _head(write))).fetchall()
    if not rows:
        raise _refusal(db, write)
    was_owner, was_due = rows[0]
    if owner != was_owner:
        db.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, write.run_id))
    if check_moves(was_due, due, now=now):
        db.execute("UPDATE runs SET next_check_at = ? WHERE id = ?", (due, write.run_id))


def _head(write: RunWrite) -> bytes:
    """The head event's JSON the write chains onto, as the guard compares it (bytes)."""
    head = write.head
    return head.encode() if isinstance(head, str) else head or b""


def _refusal(db: sqlite3.Connection, write: RunWrite) -> WaypostError:
    """Why a guarded UPDATE changed nothing: no such run, another write came first, or the
    head event it chains onto was altered since it was read."""
    row = db.execute("SELECT version FROM runs WHERE id = ?", (write.run_id,)).fetchone()
    if row is None:
        return NotFound(f"no run {write.run_id}", steps=[step("list", why="list the runs")])
    if row[0] == write.expected_version:
        return head_changed(write.run_id, row[0])
    return VersionConflict(
        f"run {write.run_id} is at version {row[0]}, not {write.expected_version}: "
        "another write came first", steps=[step("read", write.run_id, why="read it again")])


def write_runs(db: sqlite3.Connection, writes: Sequence[RunWrite],
               stored: dict[str, tuple[int, str, float | None]]) -> None:
    """Write runs whose version guards were checked in this transaction, in order (a
    run's writes may chain). `stored`: each run's version, owner and next check as read,
    kept current as the writes go.

    SQLite rewrites an index whenever its column is SET, even to the same value: owner
    and next_check_at are written only when they must change (`check_moves`), so a
    heartbeat moves one index entry, the board's (state, updated_at), and its place in
    the change feed. A next check that must move is set by the guarded UPDATE itself
    (one rewrite of the row, not two); the page's writes go in page order, as runs of
    consecutive rows that take the same statement."""
    if not writes:
        return
    (position,) = db.execute(f"SELECT {NEXT_CHANGE}").fetchone()
    batches, owners, events = _page_rows(writes, stored, position)
    changed = sum(db.executemany(sql, rows).rowcount for sql, rows in batches)
    if changed != len(writes):
        raise StoreError(f"{len(writes)} guarded run writes changed {changed} rows")
    if owners:
        db.executemany("UPDATE runs SET owner = ? WHERE id = ?", owners)
    db.executemany(INSERT_EVENT, events)
    items = [item for w in writes for item in w.outbox]
    if items:
        from waypost.store.sqlite import outbox as sqlite_outbox  # here: a heartbeat queues nothing

        sqlite_outbox.queue(db, items)


Rows = list[tuple[object, ...]]


def _page_rows(writes: Sequence[RunWrite], stored: dict[str, tuple[int, str, float | None]],
               position: int) -> tuple[list[tuple[str, Rows]], Rows, Rows]:
    """`write_runs`'s statements for a page: the run updates as runs of consecutive rows
    that take the same statement (in page order), the owners that change, the events."""
    batches: list[tuple[str, Rows]] = []
    owners: Rows = []
    events: Rows = []
    moment, updated, now = None, "", 0.0  # a page's writes are mostly at one moment
    for w in writes:
        if w.packet.updated_at is not moment:  # its text and unix time made once
            moment, updated = w.packet.updated_at, w.packet.updated_at.isoformat()
            now = moment.timestamp()
        version, state, owner, head, updated, due, body = columns(w.packet, w.events[-1],
                                                                  updated)
        for e in w.events:
            events.append(event_row(e, updated if e.at is moment else None))
        _, was_owner, was_due = stored[w.run_id]
        if owner != was_owner:
            owners.append((owner, w.run_id))
        row: tuple[object, ...]
        if check_moves(was_due, due, now=now):
            sql, row = PAGE_UPDATE_CHECK, (version, state, head, updated, body, due, position,
                                           w.run_id, w.expected_version)
            was_due = due
        else:
            sql, row = PAGE_UPDATE, (version, state, head, updated, body, position, w.run_id,
                                     w.expected_version)
        position += 1
        if batches and batches[-1][0] is sql:
            batches[-1][1].append(row)
        else:
            batches.append((sql, [row]))
        stored[w.run_id] = (version, owner, was_due)
    return batches, owners, events


def columns(packet: Packet, last: Event, updated: str | None = None,
            ) -> tuple[int, str, str, str, str, float | None, str]:
    """(version, state, owner, head hash, updated at, next check, packet JSON); `updated`:
    the packet's time as text, when the caller has made it already."""
    due = next_check_at(packet)
    return (packet.version, packet.state.value, packet.owner, last.hash,
            updated or packet.updated_at.isoformat(), due.timestamp() if due else None,
            to_json(packet).decode())


def insert_events(db: sqlite3.Connection, events: Sequence[Event]) -> None:
    db.executemany(INSERT_EVENT, [event_row(e) for e in events])


def event_row(e: Event, at: str | None = None) -> tuple[str, int, str, str, str, str]:
    """An event's row; `at`: its time as text, when the caller has made it already."""
    return (e.run_id, e.seq, e.type, at or e.at.isoformat(), e.actor,
            to_json(e).decode())


# --- group commit -----------------------------------------------------------------------
# Group commit: writes that threads of one process hand in while another write is being
# made durable are committed together, in one transaction and one fsync.
#
# Each write keeps everything it had alone: its own version guard, checked inside the
# group's transaction (and so its lease epoch: a write decided from a packet another write
# has since moved is a VersionConflict, and its caller re-reads, as alone); its own
# savepoint, so its refusal or conflict rolls back only its own statements and never the
# others'; and its own answer, given only once the group's COMMIT has returned, that is,
# once it is durable (synchronous=FULL). A group that fails to commit (a full disk, a busy
# store) fails every write in it: none was acknowledged, none is there.
#
# One thread leads at a time: it takes every write waiting (up to `MOST`), commits them and
# hands the lead to the first write that arrived meanwhile. A write that finds nobody leading
# leads at once, so a lone writer waits for nobody.
#
# A write is a `RunWrite` (`SqliteStore.group`), or a relay's settle of a delivery
# (`SqliteStore.settles`): whatever the group's `commit_one` commits, and its answer is
# what that returns.

MOST = 256  # writes in one group: a bound on one transaction's size and its wait

Writing = Callable[[str], AbstractContextManager[sqlite3.Connection]]
W = TypeVar("W")  # a write handed in
A = TypeVar("A")  # its answer


class _Slot(Generic[W, A]):
    """One write handed in, and what became of it."""

    __slots__ = ("answer", "done", "error", "lead", "wake", "write")

    def __init__(self, write: W) -> None:
        self.write = write
        self.answer: A | None = None
        self.error: BaseException | None = None
        self.lead = False  # it commits the next group
        self.done = False  # its group has committed, or failed
        self.wake = allocate_lock()
        self.wake.acquire()  # released when it is done, or handed the lead


class GroupCommit(Generic[W, A]):
    """Commits writes handed in by any number of threads, grouping those that wait:
    `commit_one` commits one inside the group's transaction (raising its refusal), and
    `what` names one for an error."""

    def __init__(self, writing: Writing, commit_one: Callable[[sqlite3.Connection, W], A],
                 what: Callable[[W], str], *, most: int | None = None) -> None:
        self._writing = writing
        self._commit_one = commit_one
        self._what = what
        self._most = most  # None: `MOST`, read at each group; 1: no grouping at all
        self._mutex = allocate_lock()
        self._waiting: list[_Slot[W, A]] = []
        self._leading = False
        self.groups = 0  # groups committed (or failed): for tests and the bench
        self.writes = 0

    def commit(self, write: W) -> A:
        """Commit `write` under its own guards; return its answer once it is durable, or
        raise what refused it (its own refusal, or the group's failure)."""
        with self._mutex:
            alone = not self._leading
            if alone:  # nobody leads, so nobody waits: this write leads, and goes alone
                self._leading = True
            else:
                slot: _Slot[W, A] = _Slot(write)
                self._waiting.append(slot)
        if alone:
            return self._alone(write)
        interrupted: BaseException | None = None
        while not slot.lead:
            try:
                slot.wake.acquire()  # the leader answers, or hands this slot the lead
                break
            except BaseException as exc:  # a signal: the write may commit all the same,
                interrupted = exc  # and the lead may come here; say so once it is settled
        if not slot.done:
            self._lead(slot)
        if interrupted is not None:
            raise interrupted
        if slot.error is not None:
            raise slot.error
        return cast(A, slot.answer)  # it committed, unrefused: its answer is set

    def _alone(self, write: W) -> A:
        """Commit the write of a leader that found nobody waiting (no savepoint to pay
        for), then hand the lead to the first write that arrived meanwhile."""
        try:
            with self._writing(self._what(write)) as db:
                return self._commit_one(db, write)
        finally:
            following = self._hand_on(1)
            if following is not None:
                following.wake.release()

    def _lead(self, me: _Slot[W, A]) -> None:
        most = MOST if self._most is None else self._most
        with self._mutex:
            group = self._waiting[:most]
            del self._waiting[:most]
        try:
            self._commit(group)
        finally:
            following = self._hand_on(len(group))
            for slot in group:
                slot.done = True
                if slot is not me:
                    slot.wake.release()
            if following is not None:
                following.wake.release()

    def _hand_on(self, committed: int) -> _Slot[W, A] | None:
        """A group of `committed` writes is settled: the first write waiting is made the
        next leader (returned, for its caller to wake), or nobody leads."""
        with self._mutex:
            following = self._waiting[0] if self._waiting else None
            if following is None:
                self._leading = False
            else:
                following.lead = True
            self.groups += 1
            self.writes += committed
        return following

    def _commit(self, group: list[_Slot[W, A]]) -> None:
        if len(group) == 1:  # alone: no savepoint to pay for
            slot = group[0]
            try:
                with self._writing(self._what(slot.write)) as db:
                    slot.answer = self._commit_one(db, slot.write)
            except BaseException as exc:  # its caller raises it
                slot.error = exc
            return
        try:
            with self._writing(f"commit a group of {len(group)} writes") as db:
                for slot in group:
                    db.execute("SAVEPOINT one_write")
                    try:
                        slot.answer = self._commit_one(db, slot.write)
                    except WaypostError as exc:  # this write's own refusal: only its own
                        db.execute("ROLLBACK TO one_write")
                        slot.error = exc
                    db.execute("RELEASE one_write")
        except BaseException as exc:  # the group did not commit: no write in it is there
            for slot in group:
                slot.error = slot.error or exc
