"""Who else keeps a store: a watchdog's registration and role, and a bearer token's grant."""

# No `from __future__ import annotations` here: msgspec reads these annotations when it
# builds a decoder, and resolving them from strings would cost every command that reads a
# packet a millisecond or two; every name they use is defined above its first use.

from datetime import datetime

from waypost.model.base import QuickStrEnum, Record, quick


@quick
class WatcherRole(QuickStrEnum):
    ACTIVE = "active"  # holds its scope's sweeper lock and sweeps (on SQLite: every watcher)
    STANDBY = "standby"  # registered and retrying the lock: takes over when the holder goes


class Watcher(Record, frozen=True, kw_only=True):
    """A running watchdog's registration: it covers runs only while its lease is live."""

    id: str
    host: str
    pid: int
    interval_s: float  # how often it sweeps
    owner: str | None = None  # scope: only this owner's runs; None: every run
    started_at: datetime
    last_beat: datetime
    last_sweep: datetime | None = None
    expires_at: datetime  # past this without a beat, the watcher counts as gone
    role: WatcherRole = WatcherRole.ACTIVE


@quick
class Role(QuickStrEnum):
    """What a bearer token lets its holder do (the holder is still the actor the rules see)."""

    WORKER = "worker"  # claim or resume its run, heartbeat, block, artifacts, evidence, ready
    OWNER = "owner"  # what a worker may, and review, approve, changes, transfer, cancel, retarget
    WATCHER = "watcher"  # read, and what a watchdog records
    VIEWER = "viewer"  # read only


class Grant(Record, frozen=True, kw_only=True):
    """A bearer token as stored (its secret never is): who holds it and what it lets them do."""

    id: str  # public: `waypost token ls` and `token revoke` name it
    holder: str  # the actor every write made with it is recorded as
    role: Role
    run_id: str | None = None  # the one run it acts on; None: every run
    created_at: datetime
    created_by: str
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
