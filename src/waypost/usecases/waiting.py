"""`wait`: block until runs reach the states a parent waits for (`core.waiting`), following
the store-wide change cursor (`Store.change_cursor`, `changes_since`) rather than reading
each run again.

One `Follower` per store per process serves every waiter of that process (threads and
coroutines alike): it asks the store where the change feed stands every `POLL_S` (every
write to a run moves that cursor, a heartbeat or an owner's blocker on a run already
blocked included), scans what changed once, and hands each changed packet to the waiters
of that run. On PostgreSQL it also LISTENs, so a run starting or changing state wakes it at
once; NOTIFY alone would miss the writes that change no state. A thousand waiters cost the
store one cursor read per poll and one scan per change, not a read each.

Every wait is bounded: at most `MAX_RUNS` runs per call, at most `MAX_WAIT_S` long (the
doors cap theirs lower: `TOOL_WAIT_S` for an MCP tool call, `HTTP_WAIT_S` for a long poll).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from waypost import inputs
from waypost.core.waiting import Outcome, outcome
from waypost.durations import parse_duration
from waypost.errors import InvalidInput
from waypost.model import Packet, State, parse_states
from waypost.store import Store

POLL_S: Final = 0.2  # how often the follower asks where the change feed stands
BATCH: Final = 500  # changed runs read per scan
MAX_SCANS: Final = 20  # scans per poll at most; the rest waits for the next poll
MAX_RUNS: Final = 100  # runs one call may wait for
MAX_WAIT_S: Final = 86_400.0  # the longest wait of the CLI and the SDK (one day)
TOOL_WAIT_S: Final = 50.0  # an MCP tool call's wait: below the hosts' ~60 s tool timeout
HTTP_WAIT_S: Final = 60.0  # a long poll's wait: below the usual proxy read timeout
T = TypeVar("T")
logger = logging.getLogger("waypost.wait")


@runtime_checkable
class _Listens(Protocol):
    """A store that announces runs starting and changing state (PostgreSQL's LISTEN)."""

    def listen(self) -> Any: ...


class Waiter:
    """One wait's runs and the newest packet the follower saw of each; `wake` is called
    (from the follower's thread) whenever one of them changed."""

    def __init__(self, run_ids: Collection[str], wake: Callable[[], None]) -> None:
        self.run_ids = frozenset(run_ids)
        self.wake = wake
        self._lock = threading.Lock()
        self._latest: dict[str, Packet] = {}

    def offer(self, packet: Packet) -> None:
        with self._lock:
            held = self._latest.get(packet.id)
            if held is not None and held.version >= packet.version:
                return  # a change may come twice: the newest version seen wins
            self._latest[packet.id] = packet
        self.wake()

    def newest(self, packets: dict[str, Packet]) -> dict[str, Packet]:
        """`packets` with any newer version the follower has handed in since."""
        with self._lock:
            return {run_id: max((p, self._latest.get(run_id, p)), key=lambda q: q.version)
                    for run_id, p in packets.items()}


class Follower:
    """The store-wide change cursor, followed by one thread while anyone waits."""

    def __init__(self, store: Store, *, poll_s: float = POLL_S) -> None:
        self.store = store
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}
        self._thread: threading.Thread | None = None
        self.scans = 0  # changed-run scans made (for the bench)

    def add(self, waiter: Waiter) -> None:
        """Follow `waiter`'s runs from now on. Read the runs only after this returns: every
        change committed from then on reaches the waiter (the cursor is read first)."""
        with self._lock:
            if self._thread is None:  # a store error here leaves nothing registered
                cursor = self.store.change_cursor()
                self._thread = threading.Thread(target=self._follow, args=(cursor,),
                                                name="waypost-wait", daemon=True)
                self._thread.start()
            for run_id in waiter.run_ids:
                self._waiters.setdefault(run_id, set()).add(waiter)

    def waiting(self) -> int:
        """How many waiters are followed now (each counted once per run it waits for)."""
        with self._lock:
            return sum(len(held) for held in self._waiters.values())

    def remove(self, waiter: Waiter) -> None:
        with self._lock:
            for run_id in waiter.run_ids:
                held = self._waiters.get(run_id)
                if held is not None:
                    held.discard(waiter)
                    if not held:
                        del self._waiters[run_id]

    def _idle(self) -> bool:
        """Nobody waits: the thread ends (the next `add` starts another)."""
        with self._lock:
            if self._waiters:
                return False
            self._thread = None
            return True

    def _follow(self, cursor: int) -> None:
        listener = None
        try:
            if isinstance(self.store, _Listens):
                try:
                    listener = self.store.listen()
                except Exception:  # the cursor alone still serves
                    logger.warning("waypost wait: cannot LISTEN; following the cursor alone",
                                   exc_info=True)
            while True:
                if listener is not None:
                    try:
                        listener.poll(self.poll_s)  # returns at once on a state change
                    except Exception:
                        logger.warning("waypost wait: LISTEN failed", exc_info=True)
                        listener.close()
                        listener = None
                else:
                    time.sleep(self.poll_s)
                if self._idle():  # asked after the pause: a store closed meanwhile is not read
                    return
                try:
                    cursor = self._catch_up(cursor)
                except Exception:  # the store failed: try again at the next poll
                    logger.warning("waypost wait: cannot read the changes", exc_info=True)
        finally:
            if listener is not None:
                with suppress(Exception):
                    listener.close()

    def _catch_up(self, cursor: int) -> int:
        now = self.store.change_cursor()
        for _ in range(MAX_SCANS):
            if now <= cursor:
                break
            packets, after = self.store.changes_since(cursor, limit=BATCH)
            self.scans += 1
            self._hand_out(packets)
            if after == cursor and not packets:
                break
            cursor = after
        return cursor

    def _hand_out(self, packets: Iterable[Packet]) -> None:
        for packet in packets:
            with self._lock:
                waiters = list(self._waiters.get(packet.id, ()))
            for waiter in waiters:
                waiter.offer(packet)


_followers: weakref.WeakKeyDictionary[Store, Follower] = weakref.WeakKeyDictionary()
_followers_lock = threading.Lock()


def follower_of(store: Store) -> Follower:
    """The process's one follower of `store`, shared by every wait on it."""
    with _followers_lock:
        found = _followers.get(store)
        if found is None:
            found = _followers[store] = Follower(store)
        return found


@dataclass(frozen=True)
class Waited:
    """How a wait ended: each run's outcome and packet, in the order asked."""

    outcomes: dict[str, Outcome]
    packets: list[Packet]

    @property
    def outcome(self) -> Outcome:
        """The wait's: ended when any run ended otherwise (waiting again cannot help),
        else timed out when any did, else reached."""
        found = set(self.outcomes.values())
        for first in (Outcome.ENDED, Outcome.TIMED_OUT):
            if first in found:
                return first
        return Outcome.REACHED


def run_ids(values: Sequence[str], field: str = "runs") -> list[str]:
    """The runs to wait for, each once, in the order given: one at least, `MAX_RUNS` at most."""
    found = list(dict.fromkeys(inputs.name(v, field) for v in values))
    if not found:
        raise InvalidInput(f"{field}: name at least one run to wait for")
    if len(found) > MAX_RUNS:
        raise InvalidInput(f"{field}: at most {MAX_RUNS} runs per wait, not {len(found)}",
                           hint="wait for them in groups")
    return found


def until_states(values: Iterable[str] | None) -> frozenset[State] | None:
    """The states waited for (`--until`, comma-separated or repeated); None: the default,
    whatever needs the parent (`core.waiting.needs_parent`)."""
    states = parse_states(values or ())
    return frozenset(states) if states else None


def wait_seconds(value: str | float | None, field: str, *, default: float,
                 cap: float = MAX_WAIT_S, clamp: bool = False) -> float:
    """A wait's length: 0 (look once) up to `cap`; past it refused, or cut to `cap` when
    `clamp` (a tool call that is answered in time and called again)."""
    seconds = default if value is None else parse_duration(value, field)
    if seconds > cap:
        if clamp:
            return cap
        raise InvalidInput(f"{field}: a wait lasts at most {int(cap)}s, not {value}",
                           hint="wait again when it ends")
    return seconds


class _Watch:
    """A wait in progress: the packets as last seen, and where they stand."""

    def __init__(self, until: frozenset[State] | None, first: dict[str, Packet]) -> None:
        self.until = until
        self.packets = first

    def update(self, waiter: Waiter) -> bool:
        """Take the newest packets; True once no run is still waiting."""
        self.packets = waiter.newest(self.packets)
        return all(outcome(p, self.until) is not Outcome.WAITING
                   for p in self.packets.values())

    def result(self) -> Waited:
        found: dict[str, Outcome] = {}
        for run_id, packet in self.packets.items():
            now = outcome(packet, self.until)
            found[run_id] = Outcome.TIMED_OUT if now is Outcome.WAITING else now
        return Waited(outcomes=found, packets=list(self.packets.values()))


def wait(store: Store, runs: str | Sequence[str], *,
         until: Iterable[State | str] | None = None, timeout: float | str,
         follower: Follower | None = None,
         clock: Callable[[], float] = time.monotonic) -> Waited:
    """Block until every run in `runs` reached a state of `until` (None: whatever needs the
    parent, `core.waiting.needs_parent`) or ended otherwise, or `timeout` (seconds, or a
    duration's text; at most `MAX_WAIT_S`) passed. An unknown run is NotFound before any
    waiting; the public `waypost.wait`:

        waited = waypost.wait(store, run_id, timeout=3600)
        waited.outcome  # reached, timed_out or ended; waited.packets as they stand
    """
    runs = run_ids([runs] if isinstance(runs, str) else runs)
    states = until_states(str(s) for s in until) if until is not None else None
    seconds = wait_seconds(timeout, "timeout", default=0.0)
    follower = follower or follower_of(store)
    return _wait(store, runs, states, seconds, follower, clock)


def _wait(store: Store, runs: list[str], until: frozenset[State] | None, timeout: float,
          follower: Follower, clock: Callable[[], float]) -> Waited:
    deadline = clock() + timeout
    woken = threading.Event()
    waiter = Waiter(runs, woken.set)
    follower.add(waiter)
    try:
        watch = _Watch(until, {run_id: store.get(run_id) for run_id in runs})
        while not watch.update(waiter):
            left = deadline - clock()
            if left <= 0:
                break
            woken.wait(left)
            woken.clear()
        return watch.result()
    finally:
        follower.remove(waiter)


class Offload(Protocol):
    """Runs blocking store work off the event loop (`anyio.to_thread.run_sync`)."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


async def await_runs(store: Store, runs: Sequence[str], *, call: Offload,
                     until: frozenset[State] | None = None, timeout: float,
                     follower: Follower | None = None) -> Waited:
    """`wait` for an event loop, holding no thread while it waits: `call` runs the store's
    reads off the loop (`anyio.to_thread.run_sync`). The door decides first whether its
    caller may read the runs; the outcomes are decided on the whole packets."""
    follower = follower or follower_of(store)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        with suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(woken.set)

    waiter = Waiter(runs, wake)
    deadline = loop.time() + timeout
    try:
        await call(lambda: follower.add(waiter))
        watch = _Watch(until, await call(lambda: {r: store.get(r) for r in runs}))
        while not watch.update(waiter):
            left = deadline - loop.time()
            if left <= 0:
                break
            with suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), left)
            woken.clear()
        return watch.result()
    finally:
        follower.remove(waiter)
