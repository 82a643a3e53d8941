"""The cap on refused stops, for the one answer both hook doors give
(`waypost.hooks.answer`): a stop let through resets the count; a refused one counts (once
per host turn, when the host names its turn); past `cap` refusals in a row the agent may
stop, saying so. On a run the caller may write, the count is the run's and the cap records
a named blocker; every other refusal is counted in a `Tally` (`counted`). The decision
itself is `waypost.hooks.decide`'s."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from waypost.errors import WaypostError
from waypost.hooks import decide as hooks
from waypost.hooks.decide import StopDecision
from waypost.model import BlockerKind, Packet

if TYPE_CHECKING:
    from waypost.store.base import Store


def capped(store: Store, packet: Packet, decision: StopDecision, *, cap: int,
           turn: str | None = None, actor: str | None = None) -> StopDecision:
    """`decision` for the run's stop, counted against `cap`. The cap's blocker is written
    as `actor` (with its lease epoch when it holds the lease), else as the lease holder,
    else as the owner."""
    if not decision.block:
        store.count_stop_block(packet.id, reset=True)
        return decision
    if hooks.cap_blocker_open(packet):  # the hook gave up on this run already
        return StopDecision(block=False, reason=decision.reason)
    blocks = store.count_stop_block(packet.id, turn=turn)
    if blocks <= cap:
        return decision
    return _give_up(store, packet, decision, blocks - 1, actor)


def _give_up(store: Store, packet: Packet, decision: StopDecision, blocks: int,
             actor: str | None) -> StopDecision:
    from waypost.usecases.runs import (
        Run,  # only here: a stop hook that is let through never loads it
    )

    lease = packet.worker
    if actor is None:
        actor = lease.actor if lease is not None else packet.owner
    epoch = lease.epoch if lease is not None and lease.actor == actor else None
    store.count_stop_block(packet.id, reset=True)
    said = f"waypost: the agent was refused a stop {blocks} times in a row"
    try:
        _, blocker = Run(store, packet.id, actor=actor, epoch=epoch).block(
            BlockerKind.OTHER, hooks.cap_detail(decision, blocks))
    except WaypostError as exc:
        return StopDecision(block=False, reason=(
            f"{said}; the cap's blocker could not be recorded ({exc.message}); it may stop"))
    return StopDecision(block=False, reason=(
        f"{said}; recorded blocker {blocker} on run {packet.id} and let it stop. Resolve it "
        f"when the work goes on: waypost unblock {packet.id} {blocker} --resolution TEXT"))


# --- refusals counted off a run ------------------------------------------------------------
# A refusal that cannot be counted on a run (a session with no run, a caller that may not
# write the run, a caller with no valid token) is counted under a key in a `Tally`: the
# store's settings where the key is bounded (a local session, an issued token), else the
# server's memory (anything a remote caller could make up, which it must not write to the
# store).

MAX_STOP_CAP: Final = 1000  # the most refusals in a row a hook may be told to allow
MEMORY_KEYS: Final = 4096  # keys a server's memory tally keeps, the least recent dropped


class Tally(Protocol):
    """Consecutive refusals by key: one stop of one host turn counts once."""

    def add(self, key: str, turn: str | None) -> int:
        """One more refusal under `key` (none when `turn` is the one counted last); the count."""

    def peek(self, key: str) -> int:
        """The count under `key` as it stands."""

    def clear(self, key: str) -> None:
        """Start `key` over at 0."""


class SettingsTally:
    """A tally in the store's settings, durable and shared by every process using the
    store; its keys are setting names (`setting_name`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _read(self, key: str) -> tuple[int, str]:
        count, _, seen = self.store.settings().get(key, "").partition("\x1f")
        return (int(count) if count.isdigit() else 0), seen

    def add(self, key: str, turn: str | None) -> int:
        blocks, seen = self._read(key)
        if not (turn and turn == seen):
            blocks += 1
        self.store.put_setting(key, f"{blocks}\x1f{turn or ''}")
        return blocks

    def peek(self, key: str) -> int:
        return self._read(key)[0]

    def clear(self, key: str) -> None:
        self.store.put_setting(key, None)


class MemoryTally:
    """A tally in this process's memory, bounded (`MEMORY_KEYS`, the least recently counted
    dropped first) and safe across threads. A restart, or another server process, starts
    from 0: the loop it caps still ends, at most `cap` refusals later per process."""

    def __init__(self, limit: int = MEMORY_KEYS) -> None:
        import threading  # here: the command line's hook never makes one

        self.limit = limit
        self._counts: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: str, turn: str | None) -> int:
        with self._lock:
            blocks, seen = self._counts.pop(key, (0, ""))
            if not (turn and turn == seen):
                blocks += 1
            self._counts[key] = (blocks, turn or "")
            while len(self._counts) > self.limit:
                self._counts.popitem(last=False)
            return blocks

    def peek(self, key: str) -> int:
        with self._lock:
            return self._counts.get(key, (0, ""))[0]

    def clear(self, key: str) -> None:
        with self._lock:
            self._counts.pop(key, None)


def counted(tally: Tally, key: str, refused: StopDecision, *, cap: int, turn: str | None,
            let_go: Callable[[int], str], for_good: bool = False) -> StopDecision:
    """`refused`, counted under `key`; past `cap` in a row the agent may stop, told
    `let_go(refusals)`. The count then starts over, unless the refusal is `for_good` (a
    revoked or expired token never works again): then every later stop is let go too."""
    if for_good and tally.peek(key) > cap:
        return StopDecision(block=False, reason=let_go(cap))
    blocks = tally.add(key, turn)
    if blocks <= cap:
        return refused
    if not for_good:
        tally.clear(key)
    return StopDecision(block=False, reason=let_go(blocks - 1))


def setting_name(prefix: str, ident: str) -> str:
    """A setting named `prefix` + `ident`, or + a digest of an id that does not fit."""
    from waypost.store.shared import MAX_SETTING_NAME, SETTING_NAME_CHARS

    name = prefix + ident
    if len(name) <= MAX_SETTING_NAME and set(name) <= SETTING_NAME_CHARS:
        return name
    import hashlib  # here: the ids waypost makes fit as they are

    return prefix + hashlib.sha256(ident.encode()).hexdigest()[:40]


def read_cap(text: str) -> int:
    """A cap given as text (`--cap`, `?cap=`): a whole number from 1 to `MAX_STOP_CAP`."""
    value = int(text) if text.strip().isdigit() else 0
    if not 1 <= value <= MAX_STOP_CAP:
        raise ValueError(f"want a whole number from 1 to {MAX_STOP_CAP}")
    return value
