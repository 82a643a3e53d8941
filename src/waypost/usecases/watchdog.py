"""The watchdog: sweeps over due runs, and the watcher's own registration, lease and role.

A sweep reads only the runs whose stored `next_check_at` has come (an indexed range), a page
at a time; decides for each what a watchdog must record; and commits the whole page in one
transaction, each run under its own version guard (`Store.commit_writes`). A run another
writer changed meanwhile is read again and decided again on its own. The machine refuses a
condition that is not due or already recorded, so however many sweeps and watchers see it,
each condition is one event and one notice.

Where several hosts share a store, a watcher sweeps only while it holds its scope's sweeper
lock (`Store.sweeper_lock`): one active sweeper per scope, the others standing by.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from waypost.core.due import (
    is_due,
    next_check_at,
)
from waypost.core.history import prepare
from waypost.core.watching import actor_of, decide, next_look
from waypost.core.writes import Deferral, Due, RunWrite, Snapshot
from waypost.durations import Clock, utcnow
from waypost.errors import VersionConflict, WaypostError
from waypost.events import AnyEventData, BlockerOpened
from waypost.model import Packet, State, Watcher, WatcherRole
from waypost.store.base import Store
from waypost.store.records import SweeperLock
from waypost.store.shared import Skipped

DEFAULT_INTERVAL = 30.0
LEASE_INTERVALS = 3  # a watcher's lease lasts this many intervals unless told otherwise
BATCH = 500  # due runs read per page
MAX_STEPS = 8  # records per run per sweep (silent, then deadline, …), a guard against loops


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """One thing a sweep recorded on a run."""

    run_id: str
    seq: int
    recorded: str  # e.g. "worker_silent (b1)" or "review_overdue"
    state: str  # the run's state afterwards


class SweepReport(msgspec.Struct, frozen=True, kw_only=True):
    """One interval of a watcher: what its sweep did, or that it stood by."""

    watcher: str
    at: datetime
    role: WatcherRole = WatcherRole.ACTIVE  # standby: another watcher swept; nothing was read
    examined: int  # due runs read: the only runs a sweep touches
    actions: tuple[Action, ...] = ()
    deferred: int = 0  # due runs with nothing to record: their next check moved forward
    errors: tuple[str, ...] = ()
    sweeper: str | None = None  # a standby's live active watcher, if one is registered
    took_over: bool = False  # the lock was taken from a holder whose registration lapsed


# --- sweeping ------------------------------------------------------------------------


class _Relays:
    """Whether a relay runs, asked of the store at most once per sweep."""

    def __init__(self, store: Store, now: datetime) -> None:
        self._store, self._now = store, now
        self._running: bool | None = None

    def running(self) -> bool:
        if self._running is None:
            self._running = bool(self._store.relays(now=self._now))
        return self._running


def sweep(store: Store, *, watcher_id: str, now: datetime | None = None,
          owner: str | None = None, batch: int = BATCH) -> SweepReport:
    """Look at every run whose next check is due at `now` (only those), acting as
    `watchdog:<watcher_id>`; with `owner`, only that owner's runs. Each page of `batch` due
    runs is decided in memory and committed in one transaction: one durable write a page.
    While a page is made durable, the next one is decided (`_Upcoming`)."""
    now = now or utcnow()
    relays, tally, actor = _Relays(store, now), _Tally(), actor_of(watcher_id)
    skipped: list[Skipped] = []  # rows that do not read: named, never stopping the sweep
    page = store.due_runs(now=now, owner=owner, limit=batch, skipped=skipped)
    plans = [_plan(due, actor, now, relays) for due in page]
    while True:
        # the next page is read before this one commits (a store with one connection
        # holds a read until its commit ends); the pages' runs are apart, and this page's
        # commit moves its runs' checks on, behind where the next page starts
        following = (store.due_runs(now=now, owner=owner, limit=batch, skipped=skipped,
                                    after=(page[-1].due_at, page[-1].packet.id))
                     if page and len(page) >= batch else [])
        upcoming = _Upcoming(following, actor, now, relays)
        applied = _commit_page(store, plans, upcoming if following else None)
        _settle_page(store, page, plans, applied, actor, now, relays, tally)
        if not following:
            break
        page, plans = following, upcoming.plans()
    tally.errors += [f"{row.run_id}: skipped, {row.reason}" for row in skipped]
    return SweepReport(watcher=watcher_id, at=now, examined=tally.examined,
                       actions=tuple(tally.actions), deferred=tally.deferred,
                       errors=tuple(tally.errors))


class _Tally:
    """A sweep's report as its pages add to it."""

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.errors: list[str] = []
        self.examined = self.deferred = 0


Planned = list[tuple[RunWrite | Deferral, Action | None]]  # a run's writes, each event's action


class _Upcoming:
    """The next page's plans, made while the page before it is made durable: the store
    calls this object from another thread as its commit flushes (`Store.commit_writes`'s
    `meanwhile`), so the disk's flush and the interpreter's work use both cores. `plans`
    makes them here if the store did not (a commit that failed before its flush), and
    raises here what making them raised there."""

    def __init__(self, page: list[Due], actor: str, now: datetime, relays: _Relays) -> None:
        self._page, self._actor, self._now, self._relays = page, actor, now, relays
        self._plans: list[Planned | None] | None = None
        self._error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self._plans = [_plan(due, self._actor, self._now, self._relays)
                           for due in self._page]
        except BaseException as exc:  # raised on the sweep's own thread, by `plans`
            self._error = exc

    def plans(self) -> list[Planned | None]:
        if self._plans is None and self._error is None:
            self()  # the store never called it
        if self._error is not None:
            raise self._error
        assert self._plans is not None
        return self._plans


def _commit_page(store: Store, plans: list[Planned | None],
                 meanwhile: Callable[[], None] | None) -> list[bool] | None:
    """Commit a page's planned writes in one transaction (the store calls `meanwhile` as
    it flushes). Which writes went in, or None when the page could not be committed (its
    runs are then visited one at a time)."""
    writes = [write for plan in plans if plan is not None for write, _ in plan]
    try:
        return store.commit_writes(writes, meanwhile=meanwhile)
    except WaypostError:
        return None


def _settle_page(store: Store, page: list[Due], plans: list[Planned | None],
                 applied: list[bool] | None, actor: str, now: datetime, relays: _Relays,
                 tally: _Tally) -> None:
    """Settle each run of a committed page in page order. A run that could not be decided,
    or that another writer changed since the page was read, is visited on its own: read
    again, decided again."""
    if applied is None:
        plans, applied = [None] * len(page), []
    tally.examined += len(page)
    at = 0  # where the run's results begin in `applied`
    for due, plan in zip(page, plans, strict=True):
        try:
            if plan is None:
                done, deferred = _visit(store, due, due.packet.version, actor, now, relays)
            else:
                at += len(plan)
                done, deferred = _settle(store, due, plan, applied[at - len(plan):at], actor,
                                         now, relays)
        except WaypostError as exc:
            tally.errors.append(f"{due.packet.id}: {exc.message}")
            continue
        tally.actions += done
        tally.deferred += deferred


def _next_step(packet: Packet, selected: int, now: datetime,
               relays: _Relays) -> AnyEventData | Deferral | None:
    """The one rule a visit follows at each step: the event to record next; else the run's
    next check, moved on; else None, when a write since the sweep selected the run (at
    version `selected`) stored a check still ahead."""
    running = packet.state is State.APPROVED and relays.running()
    data = decide(packet, now, relay_running=running)
    if data is not None:
        return data
    # nothing due: with no relay running, `decide` weighed every moment the next check is
    # the first of, so the check has not come either (with one, an excused stall may have)
    if packet.version != selected and not (running and is_due(next_check_at(packet), now)):
        return None
    return Deferral(run_id=packet.id, expected_version=packet.version,
                    at=next_look(packet, now, relay_running=running))


def _plan(due: Due, actor: str, now: datetime, relays: _Relays) -> Planned | None:
    """A run's visit decided without writing: each event chains onto the packet the one
    before makes, as a visit reads it back. None when deciding fails (the rules refuse an
    event): the run is then visited on its own, where the failure is reported."""
    planned: Planned = []
    snap: Snapshot = due
    try:
        for _ in range(MAX_STEPS):
            step = _next_step(snap.packet, due.packet.version, now, relays)
            if step is None:
                break
            if isinstance(step, Deferral):
                planned.append((step, None))
                break
            write = prepare(snap, [(step, None)], actor=actor, at=now)
            planned.append((write, _action(write, step)))
            snap = Snapshot.chained(write.packet, write.events[-1].hash)
    except WaypostError:
        return None
    return planned


def _settle(store: Store, due: Due, planned: Planned, results: list[bool], actor: str,
            now: datetime, relays: _Relays) -> tuple[list[Action], bool]:
    """What became of a run's planned writes (`results`: whether each went in), as
    `_visit` reports it. An event another writer came before is decided again on a visit;
    a deferral it came before is left alone: that writer stored its own next check."""
    if len(results) == len(planned) and all(results):  # most runs: every write went in
        actions = [action for _, action in planned if action is not None]
        return actions, not actions and bool(planned) and isinstance(planned[-1][0], Deferral)
    actions = []
    for (write, action), committed in zip(planned, results, strict=True):
        if not committed and isinstance(write, Deferral):
            return actions, False
        if not committed:
            more, moved = _visit(store, store.load(due.packet.id), due.packet.version, actor,
                                 now, relays)
            return actions + more, moved and not actions
        if action is not None:
            actions.append(action)
    return actions, False  # a write missed: nothing was deferred


def _visit(store: Store, snap: Snapshot, selected: int, actor: str, now: datetime,
           relays: _Relays) -> tuple[list[Action], bool]:
    """Record what is due on one run, one commit per event, reading the run again after
    each; then move its next check on. `selected` is its version when the sweep read it.
    Returns the actions and whether the check was deferred with nothing recorded."""
    actions: list[Action] = []
    for _ in range(MAX_STEPS):
        step = _next_step(snap.packet, selected, now, relays)
        if step is None:
            return actions, False
        if isinstance(step, Deferral):
            moved = store.defer_check(step.run_id, expected_version=step.expected_version,
                                      at=step.at)
            return actions, moved and not actions
        try:
            write = prepare(snap, [(step, None)], actor=actor, at=now)
            store.commit_write(write)
            actions.append(_action(write, step))
        except VersionConflict:
            pass  # another writer came first: read again and decide again
        snap = store.load(snap.packet.id)
    return actions, False


def _action(write: RunWrite, data: AnyEventData) -> Action:
    return Action(run_id=write.run_id, seq=write.packet.version, recorded=_what(data),
                  state=write.packet.state.value)


def _what(data: AnyEventData) -> str:
    if isinstance(data, BlockerOpened):
        return f"{data.kind} ({data.blocker_id})"
    return str(getattr(data, "topic", type(data).__name__))


# --- the watcher's registration ---------------------------------------------------------


def default_watcher_id(*, once: bool, owner: str | None) -> str:
    """`<host>-<pid>` for a daemon; `<host>-cron[-<owner>]` for `--once`, so each cron run
    renews one registration instead of adding another."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
    if once:
        return f"{host}-cron" + (f"-{re.sub(r'[^A-Za-z0-9._-]', '-', owner)}" if owner else "")
    return f"{host}-{os.getpid()}"


class Watch:
    """A registered watcher: each interval it sweeps if it holds its scope's sweeper lock,
    or stands by, and renews its lease either way.

    A standby retries the lock every interval, so it takes over as soon as the holder's
    session ends (a killed holder frees it at once). A holder that is stuck, or whose host
    is gone, keeps its session for a while; once no live active watcher of the scope is
    registered at two looks in a row (its lease ended), a standby ends that hold itself.
    """

    def __init__(self, store: Store, *, interval: float = DEFAULT_INTERVAL,
                 lease: float | None = None, owner: str | None = None,
                 watcher_id: str | None = None, clock: Clock = utcnow) -> None:
        self.store = store
        self.clock = clock
        self.lease = lease if lease is not None else LEASE_INTERVALS * interval
        now = clock()
        self.info = Watcher(
            id=watcher_id or default_watcher_id(once=False, owner=owner),
            host=socket.gethostname(), pid=os.getpid(), interval_s=interval, owner=owner,
            started_at=now, last_beat=now, expires_at=now + timedelta(seconds=self.lease),
            role=WatcherRole.STANDBY)  # until it holds the lock
        self._lock: SweeperLock | None = None
        self._orphaned = False  # the last look found no live active watcher of the scope

    @property
    def id(self) -> str:
        return self.info.id

    def beat(self, *, swept_at: datetime | None = None, role: WatcherRole | None = None) -> None:
        """Register, or renew the lease for another `lease` seconds from now."""
        now = self.clock()
        self.info = msgspec.structs.replace(
            self.info, last_beat=now, last_sweep=swept_at or self.info.last_sweep,
            expires_at=now + timedelta(seconds=self.lease), role=role or self.info.role)
        self.store.beat_watcher(self.info)

    def turn(self) -> SweepReport:
        """One interval: sweep as the active sweeper, or renew the lease as a standby."""
        now = self.clock()
        if self._lock is None:
            self._lock = self.store.sweeper_lock(self.info.owner)
        took_over = False
        if not self._lock.try_acquire():
            sweeper = self._live_sweeper(now)
            stuck, self._orphaned = sweeper is None and self._orphaned, sweeper is None
            self.beat(role=WatcherRole.STANDBY)  # registered even if ending the hold fails
            if not (stuck and self._lock.take_over()):
                return SweepReport(watcher=self.id, at=now, role=WatcherRole.STANDBY,
                                   examined=0, sweeper=sweeper)
            took_over = True
        self._orphaned = False
        if self.info.role is not WatcherRole.ACTIVE:
            self.beat(role=WatcherRole.ACTIVE)  # standbys see the new sweeper before it sweeps
        report = self.sweep()
        return msgspec.structs.replace(report, took_over=took_over)

    def _live_sweeper(self, now: datetime) -> str | None:
        """Another live active watcher of this watcher's scope, if one is registered."""
        return next((w.id for w in self.store.watchers(now=now)
                     if w.role is WatcherRole.ACTIVE and w.owner == self.info.owner
                     and w.id != self.id), None)

    def sweep(self) -> SweepReport:
        """One sweep at the clock's now, then a beat recording it (callers hold the lock)."""
        now = self.clock()
        report = sweep(self.store, watcher_id=self.id, now=now, owner=self.info.owner)
        self.beat(swept_at=now, role=WatcherRole.ACTIVE)
        return report

    def give_up_lock(self) -> None:
        """Let another watcher take the lock now (a `--once` run, done until cron runs it
        again: its registration stays for its lease)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def release(self) -> None:
        """Give up the lock and drop the registration (a clean shutdown)."""
        try:
            self.give_up_lock()
        finally:
            self.store.remove_watcher(self.id)

    def run(self, stop: threading.Event, on_report: Callable[[SweepReport], None],
            on_error: Callable[[WaypostError], None]) -> None:
        """Take a turn every interval until `stop` is set, then release. A failed turn is
        reported and retried next interval; the lease then lapses on its own."""
        try:
            while not stop.is_set():
                try:
                    on_report(self.turn())
                except WaypostError as exc:
                    on_error(exc)
                stop.wait(self.info.interval_s)
        finally:
            self.release()
