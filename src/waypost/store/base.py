"""The store contract: domain operations every backend implements in its own idiom."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from waypost.core.writes import Deferral, Due, RunWrite, Snapshot
from waypost.errors import InvalidInput, StaleLease, StoreError, VersionConflict, step
from waypost.model import (
    TERMINAL,
    Delivery,
    Grant,
    OutboxItem,
    Packet,
    RelayInfo,
    State,
    Watcher,
)
from waypost.store.answers import AnswerQueue
from waypost.store.cursors import InboxCursors
from waypost.store.imports import ImportedRuns
from waypost.store.keys import KeyRing
from waypost.store.shared import Skipped
from waypost.store.windows import EventWindows

if TYPE_CHECKING:  # records load where they are made: a heartbeat makes none
    from waypost.events import Event  # events load where they are built or read: `show` reads none
    from waypost.store.records import Diagnosis, Pruned, SchemaState, SweeperLock

_Moment = TypeVar("_Moment", float, datetime)  # unix time (SQLite) or datetime (PostgreSQL)


def check_moves(stored: _Moment | None, due: _Moment | None, *, now: _Moment) -> bool:
    """Whether a commit at `now` must store the run's next check `due` over `stored`.

    The stored next check is when the watchdog must look *by*: a lower bound. A commit
    lowers it or clears it, and replaces it once it has come; it does not raise one still
    ahead. Most commits are heartbeats, which only push the next check later, and a column
    left alone leaves its index alone. A sweep that finds such a run not yet due moves its
    check on (`defer_check`)."""
    if stored == due:
        return False
    if stored is None or due is None:
        return True
    return due < stored or stored <= now


CLAIM_WINDOW = 8  # a claim of n chooses one row per run among the earliest n * this due
PRUNE_BATCH = 500  # runs deleted per transaction by `Store.prune`
MAX_CONFLICTS = 200  # a write decided again this many times has met a writer storm: give up

_T = TypeVar("_T")


def retry_conflicts(attempt: Callable[[], _T], *, what: str, limit: int = MAX_CONFLICTS,
                    pause: Callable[[int], None] | None = None) -> _T:
    """The one read-decide-commit loop: call `attempt` (it reads, decides with the rules and
    commits under the version guard) again while another writer came first
    (VersionConflict), at most `limit` times; `pause(n)` runs between tries. Every writer
    goes through it: the use cases, resume and the relay."""
    for tried in range(limit):
        try:
            return attempt()
        except VersionConflict:
            if pause is not None:
                pause(tried)
    raise StoreError(f"{what}: gave up after {limit} conflicting writes")


def lost_lease(current: Delivery, relay: str) -> StaleLease:
    """The error for a relay finishing or retrying a delivery it no longer holds, as it
    stands now (`current`)."""
    now_with = (f"{current.lease_owner} holds it now (attempt {current.attempts})"
                if current.lease_owner else f"it is {current.status}")
    return StaleLease(
        f"relay {relay} no longer holds delivery {current.key}: {now_with}",
        hint="nothing to do", steps=[step("read", current.run_id, why="see where it stands")],
    )


class Store(InboxCursors, AnswerQueue, KeyRing, ImportedRuns, EventWindows, ABC):
    """Where packets, their events and blobs live. Every write is one durable transaction."""

    url: str

    @abstractmethod
    def create(self, event: Event, packet: Packet, *, fingerprint: str,
               session_id: str | None = None) -> tuple[Packet, bool]:
        """Commit a new run's first event and packet; return (packet, created).

        With `packet.idempotency_key` set and already used: the same `fingerprint` returns
        the existing run with created=False; another raises IdempotencyConflict.
        `session_id` (an agent host's session) is kept beside the packet, never in it.
        """

    @abstractmethod
    def session_run(self, session_id: str) -> str | None:
        """The id of the newest run started for this agent-host session, or None."""

    @abstractmethod
    def attach_session(self, run_id: str, session_id: str) -> None:
        """Record `session_id` as the agent-host session of the run (the newest run of a
        session is its run); NotFound for no such run."""

    @abstractmethod
    def count_stop_block(self, run_id: str, *, reset: bool = False,
                         turn: str | None = None) -> int:
        """Add one to the run's count of consecutive stop-hook refusals and return it; with
        `reset`, set it to 0 (and return 0). With `turn` (what names the host's turn,
        `hooks.turn_key`: a few hundred characters at most), a stop of the turn counted
        last is not counted again and the count is returned as it stands: one stop
        delivered twice (Cursor runs its own hooks and Claude Code's) counts once, however
        the two race. The turn is kept as a store setting (`stop_turn_setting`) until the
        count is reset. NotFound for no such run."""

    @abstractmethod
    def load(self, run_id: str) -> Snapshot:
        """The current packet, its head hash and its head event as stored (the bytes a
        write checks before chaining onto them, `history.check_head`), or NotFound."""

    @abstractmethod
    def commit_write(self, write: RunWrite) -> None:
        """Append the write's events, replace the packet and queue its outbox rows, all in
        one transaction, if the packet's version is still `write.expected_version`: the one
        write primitive (`history.prepare` decides what goes in it).

        Raises VersionConflict when another write came first, NotFound for no such run.
        An outbox key that already exists is kept as it is (never queued twice), except a
        final delivery planned again, decided against its row as it stands inside this
        transaction (`core.outbox.settle_final`): a `failed` one planned by `approved` (its
        `delivery_failed` blocker was resolved) is queued again under the same key, and one
        planned to another target (a retarget) takes that target; either way status
        `queued` rows get `next_attempt_at` and `queued_at` = the item's `created_at`, lease
        cleared; `attempts`, `last_error`, `created_at` and `event_seq` are kept. While a
        relay holds a live lease on that row the whole write is refused (Conflict), and
        moving it away from a target that may already have it (`outcome_unknown_at`, or a
        lapsed lease with no outcome) needs `item.accept_duplicate` (else RuleViolation):
        nothing is written then.
        """

    def commit(self, run_id: str, expected_version: int, events: Sequence[Event],
               packet: Packet, outbox: Sequence[OutboxItem] = ()) -> None:
        """`commit_write`, from the write's parts."""
        self.commit_write(RunWrite(run_id=run_id, expected_version=expected_version,
                                   events=tuple(events), packet=packet, outbox=tuple(outbox)))

    @abstractmethod
    def events(self, run_id: str) -> list[Event]:
        """The run's events in order (IntegrityError names a row that does not decode)."""

    @abstractmethod
    def list_runs(self, *, states: Collection[State] | None = None, owner: str | None = None,
                  limit: int | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        """Packets, most recently updated first, filtered by state and owner. A row that
        does not decode is left out (one bad row never hides the others) and noted in
        `skipped`, when given."""

    @abstractmethod
    def runs_page(self, *, before: str | None, limit: int,
                  states: Collection[State] | None = None, owner: str | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        """One page of runs newest first by id (the order they started in), those with an
        id below `before` (None: from the newest): a page costs its own rows, however many
        runs are stored, and never repeats or skips a run that changed meanwhile."""

    @abstractmethod
    def change_cursor(self) -> int:
        """Where the change feed stands now: every write committed before this call lies
        below it (`changes_since` of it returns only what commits later)."""

    @abstractmethod
    def changes_since(self, cursor: int, *, limit: int = 500) -> tuple[list[Packet], int]:
        """The packets of runs written at or past `cursor`, as they stand, in commit order,
        at most about `limit` of them; and the cursor to ask with next. A run written again
        comes again; nothing committed at or past `cursor` is ever skipped. A change may
        come more than once (PostgreSQL, while an older write to the store is still open):
        a reader keeps the newest version it has seen of each run."""

    # --- bearer tokens (only a hash of a secret is stored) ----------------------------

    @abstractmethod
    def put_token(self, grant: Grant, token_hash: str) -> None:
        """Store a new token's grant under the hash of its secret; `Conflict` (nothing
        stored) when a token with its id exists already, decided in one statement."""

    @abstractmethod
    def token_grant(self, token_hash: str) -> Grant | None:
        """The grant of the token whose secret hashes to this, or None."""

    @abstractmethod
    def grants(self) -> list[Grant]:
        """Every token's grant, oldest first."""

    @abstractmethod
    def revoke_token(self, token_id: str, *, at: datetime) -> Grant | None:
        """Mark the token revoked (once: a second revoke keeps the first time) and return
        its grant; None for no such token."""

    @abstractmethod
    def run_ids(self) -> list[str]:
        """Every run id, oldest first."""

    @abstractmethod
    def put_blob(self, data: bytes) -> str:
        """Store bytes content-addressed; return their sha256 (idempotent). Storing bytes
        that exist already renews their stored-at time, which `prune` honours."""

    @abstractmethod
    def get_blob(self, sha256: str) -> bytes:
        """The bytes stored under `sha256`, or NotFound."""

    # --- the outbox, for delivery relays ----------------------------------------------

    @abstractmethod
    def claim_deliveries(self, relay: str, *, now: datetime, lease_s: float,
                         limit: int = 1) -> list[Delivery]:
        """Lease up to `limit` due deliveries to `relay` (a batch a relay sends at once);
        return them as updated, in claim order.

        Due: status `queued`, `next_attempt_at <= now`, and no live lease (none, or
        `lease_expires_at <= now`: its relay died mid-attempt). Earliest `next_attempt_at`
        first (then key). One row per run at a time: a claim takes only the earliest due
        row of each run (among the earliest `limit * CLAIM_WINDOW` due rows), and none of
        a run that has a row leased live, so a run's deliveries are sent one after the
        other, in order (a Slack notice's message exists before the next notice updates
        it). Each claimed row gets `lease_owner = relay`, `lease_expires_at = now +
        lease_s`, `last_attempt_at = now` and `attempts + 1` (the attempt, which
        `retry_delivery` and `finish_delivery` take as the claim's fencing token).
        Concurrent callers never get the same row while its lease is live.
        """

    @abstractmethod
    def retry_delivery(self, key: str, relay: str, *, error: str, retry_at: datetime,
                       outcome_unknown: bool = False, attempt: int | None = None
                       ) -> Delivery:
        """Record a failed attempt that may succeed later: the row stays `queued`, due at
        `retry_at`, with `last_error = error` and its lease cleared. With `outcome_unknown`
        (the request went out, no answer came back) `outcome_unknown_at` becomes the
        attempt's start (`last_attempt_at`); it stays set until the target changes.

        StaleLease if `relay` is not the row's `lease_owner` or the row is not `queued`
        (another relay took it over), or with `attempt` (the fencing token: the `attempts`
        of the row as claimed) if the row has been claimed since, by any relay (its lease
        lapsed mid-send); NotFound for an unknown key. Nothing changes then.
        """

    @abstractmethod
    def finish_delivery(self, key: str, relay: str, *, at: datetime,
                        receipt: str | None = None, error: str | None = None,
                        write: RunWrite | None = None, outcome_unknown: bool = False,
                        attempt: int | None = None) -> Delivery:
        """Settle a delivery for good and clear its lease, in one transaction: `sent` with
        `sent_at = at` and `receipt` (when `receipt` is given; `last_error` is kept), else
        `failed` with `last_error = error` (kept as it was when `error` is None), marked as
        `retry_delivery` marks it with `outcome_unknown`.
        `attempts` is not changed (the claim counted the attempt).

        With `write`, the run's events, packet and outbox rows are committed exactly as
        `commit` does, in the same transaction: the `delivered` / `delivery_failed` event
        and the row change are one atomic step. StaleLease as in `retry_delivery`;
        VersionConflict and NotFound as in `commit`. On any error nothing changes.
        """

    @abstractmethod
    def deliveries(self, run_ids: Collection[str]) -> list[Delivery]:
        """The outbox rows of these runs, in one indexed query however many ids: by run
        id, then `event_seq`. Unknown ids give no rows."""

    @abstractmethod
    def next_delivery_due(self) -> datetime | None:
        """When the earliest `queued` delivery becomes claimable, at the latest: the later
        of its `next_attempt_at` and the expiry of every live lease on its run's queued
        rows (its own, or the one in flight before it); None when nothing is queued."""

    @abstractmethod
    def beat_relay(self, relay: RelayInfo) -> None:
        """Register a delivery relay, or renew its registration (upsert by `relay.id`)."""

    @abstractmethod
    def remove_relay(self, relay_id: str) -> None:
        """Drop a relay's registration (its clean shutdown); an unknown id is ignored."""

    @abstractmethod
    def relays(self, *, now: datetime) -> list[RelayInfo]:
        """Registered relays whose `expires_at` is after `now`, latest beat first."""

    # --- the watchdog -----------------------------------------------------------------

    @abstractmethod
    def beat_watcher(self, watcher: Watcher) -> None:
        """Register a watcher, or renew its registration: upsert by `watcher.id`, every
        field replaced (a renewal carries the new `last_beat`, `last_sweep`, `expires_at`)."""

    @abstractmethod
    def remove_watcher(self, watcher_id: str) -> None:
        """Drop a watcher's registration (its clean shutdown); an unknown id is ignored."""

    @abstractmethod
    def watchers(self, *, now: datetime) -> list[Watcher]:
        """Registered watchers whose `expires_at` is after `now`, latest beat first: one
        small indexed query (`show` and `ls` make it to tell who covers a run)."""

    @abstractmethod
    def sweeper_lock(self, owner: str | None = None) -> SweeperLock:
        """The lock a watcher holds to sweep every run (`owner` None) or one owner's runs:
        one holder per scope at a time where several hosts share the store, `AlwaysHeld`
        where they cannot. Close it when done."""

    @abstractmethod
    def due_runs(self, *, now: datetime, owner: str | None = None,
                 after: tuple[datetime, str] | None = None, limit: int = 500,
                 skipped: list[Skipped] | None = None) -> list[Due]:
        """Runs whose stored `next_check_at` is at or before `now`, ordered by
        (`next_check_at`, id), at most `limit`; only that owner's with `owner`.

        `after` = (`due_at`, run id) of the last row of the previous page: only rows after
        it (keyset paging). Read through the index on `next_check_at`: the cost grows with
        the due runs, never with the stored runs. Runs with no next check never match.
        A row that does not decode is left out and noted in `skipped` (when given); the
        page is filled past it, so fewer than `limit` rows still means the last page.
        Each run comes with its head event as stored, as from `load`.
        """

    @abstractmethod
    def defer_check(self, run_id: str, *, expected_version: int, at: datetime | None) -> bool:
        """Set the run's `next_check_at` to `at` (None: never) without an event, if its
        packet is still at `expected_version`; return whether it was set. A miss is not an
        error: a newer write has stored its own next check. An unknown run gives False."""

    @abstractmethod
    def commit_writes(self, writes: Sequence[RunWrite | Deferral], *,
                      meanwhile: Callable[[], None] | None = None) -> list[bool]:
        """Commit a page of writes in one transaction, in order, each under its own version
        guard: a `RunWrite` as `commit` does, a `Deferral` as `defer_check` does. Returns,
        for each write, whether it was committed.

        A write whose run is no longer at its `expected_version` (another writer came
        first), or is gone, is skipped with False and does not stop the others; so is every
        later write of that run in `writes` (see `in_force`). Any other error commits
        nothing. A run's writes chain: the second expects the version the first writes.

        `meanwhile`, when given, is called at most once, on another thread, while the
        transaction is made durable (`shared.Meanwhile`; where no thread can be started,
        on this one once the commit has ended): the sweep decides its next page there.
        This returns only once both have ended, and raises what either raised (the
        commit's error first); a commit that fails before its flush does not call it. It
        may read the store, never write it: on SQLite its read waits for the commit and
        sees it, on PostgreSQL its read runs beside the commit and sees the store as it
        was before.
        """

    def prune(self, *, before: datetime, states: Collection[State],
              blobs_before: datetime) -> Pruned:
        """Delete the runs in `states` last updated before `before`, with their events and
        outbox rows; then every blob no remaining packet names (`artifacts[].sha256`,
        `evidence[].log_sha256`) that was last stored before `blobs_before` (an artifact's
        blob is stored just before the event that names it: the grace keeps it); then
        watcher registrations that expired before `before`. A pruned run's inbox marks
        and answers go with it; `Pruned.unacknowledged` counts the runs whose owner had not
        acknowledged their last event (`waypost inbox --ack`), so what an inbox loses is said.

        `states` must be terminal (`delivered`, `cancelled`): any other raises InvalidInput
        and deletes nothing. Runs are deleted in short transactions, each run with all of
        its rows at once, so a crash never leaves half a run.
        """
        active = sorted(s.value for s in states if s not in TERMINAL)
        if active:
            raise InvalidInput(f"prune removes finished runs only, not {', '.join(active)}",
                               hint="use --state delivered,cancelled")
        names, totals = [s.value for s in states], [0, 0, 0, 0]
        while names:
            batch = self._prune_runs(before, names)
            totals = [t + b for t, b in zip(totals, batch, strict=True)]
            if batch[0] < PRUNE_BATCH:
                break
        blobs, size = self._prune_blobs(blobs_before, before)
        from waypost.store.records import Pruned

        return Pruned(runs=totals[0], events=totals[1], deliveries=totals[2], blobs=blobs,
                      blob_bytes=size, unacknowledged=totals[3])

    @abstractmethod
    def _prune_runs(self, before: datetime, states: list[str]) -> tuple[int, int, int, int]:
        """Delete one transaction's batch (at most PRUNE_BATCH runs, each whole, inbox marks
        included); returns (runs, events, outbox rows, runs not acknowledged) deleted."""

    @abstractmethod
    def _prune_blobs(self, blobs_before: datetime, watchers_before: datetime) -> tuple[int, int]:
        """Delete unreferenced blobs stored before `blobs_before` and watcher registrations
        expired before `watchers_before`; returns (blobs, their bytes)."""

    # --- operations -------------------------------------------------------------------

    @abstractmethod
    def initialise(self) -> None:
        """Create the store now, its schema current, if it does not exist yet (`waypost
        init`); one that exists is left as it is. Opening a store never creates it."""

    @abstractmethod
    def settings(self) -> dict[str, str]:
        """The store-level settings (name → value), the same for every process using the
        store. Read it when a rule needs it: nothing on the heartbeat's path does."""

    @abstractmethod
    def put_setting(self, name: str, value: str | None) -> None:
        """Set a store-level setting (None removes it); InvalidInput for a malformed name
        or value (`check_setting`)."""

    @abstractmethod
    def schema_state(self) -> SchemaState:
        """The store's schema version against the newest this waypost ships."""

    @abstractmethod
    def diagnose(self, *, opened_ms: float, max_skew: float) -> list[Diagnosis]:
        """What `waypost doctor` checks of this backend: how it connected (`opened_ms`), its
        durability settings or its clock against this host's (`max_skew` seconds)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def get(self, run_id: str) -> Packet:
        return self.load(run_id).packet

    def rows_diagnosis(self) -> Diagnosis:
        """Whether every run's stored packet reads (`doctor`): one that does not is left
        out of every list, and its own reads fail naming it."""
        from waypost.store.records import Diagnosis, Status

        skipped: list[Skipped] = []
        count = len(self.list_runs(skipped=skipped))
        if not skipped:
            return Diagnosis(name="runs", status=Status.OK, detail=f"{count} run(s) read")
        named = "; ".join(f"{s.run_id} ({s.reason[:160]})" for s in skipped[:10])
        more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        return Diagnosis(name="runs", status=Status.FAIL,
                         detail=f"{len(skipped)} of {count + len(skipped)} run(s) do not "
                         f"read: {named}{more}; restore them from a backup")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
