"""The rows a SQLite store writes for a run: the one guarded write of a run's new packet
and events (`commit_one`), a page of them under guards already checked (`write_runs`),
and the rows themselves. Every statement runs in the caller's transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from waypost.core.due import next_check_at
from waypost.core.writes import RunWrite
from waypost.errors import NotFound, StoreError, VersionConflict, WaypostError
from waypost.events import Event
from waypost.model import Packet, to_json
from waypost.store.base import check_moves

# where a write lands in the change feed: one past the highest (the write lock makes the
# positions' order the commits' order); the index runs_change serves the max
NEXT_CHANGE = "(SELECT coalesce(max(change_pos), 0) + 1 FROM runs)"
INSERT_EVENT = ("INSERT INTO events (run_id, seq, type, at, actor, body)"
                " VALUES (?, ?, ?, ?, ?, ?)")
# a run's new version and packet, only if it is still at the version it was decided from
GUARDED_UPDATE = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
                  f" packet = ?, change_pos = {NEXT_CHANGE} WHERE id = ? AND version = ?")
# ... handing back what it left alone: the owner and the next check
GUARDED_UPDATE_RETURNING = f"{GUARDED_UPDATE} RETURNING owner, next_check_at"
# a page of writes (`write_runs`): the feed positions counted on from one read of the
# highest, as the subquery would give them row by row; and, where it must move, the next
# check in the same statement, so that the row is rewritten once, not twice
PAGE_UPDATE = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
               " packet = ?, change_pos = ? WHERE id = ? AND version = ?")
PAGE_UPDATE_CHECK = ("UPDATE runs SET version = ?, state = ?, head_hash = ?, updated_at = ?,"
                     " packet = ?, next_check_at = ?, change_pos = ? WHERE id = ? AND version = ?")


def commit_one(db: sqlite3.Connection, write: RunWrite) -> None:
    """Commit one write inside the caller's transaction, under its version guard.

    The guarded UPDATE is the guard: it changes the row only at the expected version,
    and hands back the owner and next check it left alone (`write_runs` says why they
    are written apart), so a heartbeat runs two statements, not three."""
    version, state, owner, head, updated, due, body = columns(write.packet, write.events[-1])
    run_id = write.run_id
    rows = db.execute(GUARDED_UPDATE_RETURNING,
                      (version, state, head, updated, body, run_id,
                       write.expected_version)).fetchall()  # to the end: it is done
    if not rows:
        raise _refusal(db, write)
    was_owner, was_due = rows[0]
    if owner != was_owner:
        db.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, run_id))
    if check_moves(was_due, due, now=write.packet.updated_at.timestamp()):
        db.execute("UPDATE runs SET next_check_at = ? WHERE id = ?", (due, run_id))
    events = write.events
    if len(events) == 1:  # most writes: one event, at the packet's time (written above)
        at = updated if events[0].at is write.packet.updated_at else None
        db.execute(INSERT_EVENT, event_row(events[0], at))
    else:
        insert_events(db, events)
    if write.outbox:
        from waypost.store import sqlite_outbox  # here: a heartbeat queues nothing

        sqlite_outbox.queue(db, write.outbox)


def _refusal(db: sqlite3.Connection, write: RunWrite) -> WaypostError:
    """Why a guarded UPDATE changed nothing: no such run, or another write came first."""
    row = db.execute("SELECT version FROM runs WHERE id = ?", (write.run_id,)).fetchone()
    if row is None:
        return NotFound(f"no run {write.run_id}", hint="list runs with: waypost ls")
    return VersionConflict(
        f"run {write.run_id} is at version {row[0]}, not {write.expected_version}: "
        "another write came first", hint=f"read it again: waypost show {write.run_id}")


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
        from waypost.store import sqlite_outbox  # here: a heartbeat queues nothing

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

