"""Group commit: writes that threads of one process hand in while another write is being
made durable are committed together, in one transaction and one fsync.

Each write keeps everything it had alone: its own version guard, checked inside the
group's transaction (and so its lease epoch: a write decided from a packet another write
has since moved is a VersionConflict, and its caller re-reads, as alone); its own
savepoint, so its refusal or conflict rolls back only its own statements and never the
others'; and its own answer, given only once the group's COMMIT has returned, that is,
once it is durable (synchronous=FULL). A group that fails to commit (a full disk, a busy
store) fails every write in it: none was acknowledged, none is there.

One thread leads at a time: it takes every write waiting (up to `MOST`), commits them and
hands the lead to the first write that arrived meanwhile. A write that finds nobody leading
leads at once, so a lone writer waits for nobody.

A write is a `RunWrite` (`SqliteStore.group`), or a relay's settle of a delivery
(`SqliteStore.settles`): whatever `commit_one` commits, and its answer is what that returns.
"""

from __future__ import annotations

import sqlite3
from _thread import allocate_lock  # threading's Lock, without importing threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar, cast

from waypost.errors import WaypostError

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
