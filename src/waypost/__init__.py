"""waypost: checkpoint packets for long-running agent work.

    store = waypost.open_store("sqlite:///work.db")
    run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                           target="file:result.md", kind=waypost.Kind.LONG_RUNNING,
                           max_silence=1800)
    worker = waypost.Run(store, run.id, actor="worker-1")
    worker.claim()
    worker.heartbeat(note="reproduced", progress=0.3)
"""

from waypost.errors import (
    Conflict,
    IdempotencyConflict,
    IllegalTransition,
    IntegrityError,
    InvalidInput,
    NotAuthorized,
    NotFound,
    Refused,
    RuleViolation,
    StaleLease,
    StoreError,
    VersionConflict,
    WaypostError,
)
from waypost.machine import apply, fold
from waypost.model import (
    Artifact,
    ArtifactRole,
    Assurance,
    Authority,
    Blocker,
    BlockerKind,
    Event,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    Liveness,
    Packet,
    State,
    StopRules,
    Verdict,
)
from waypost.runs import Run, start
from waypost.store import Store, open_store

__all__ = [
    "Artifact",
    "ArtifactRole",
    "Assurance",
    "Authority",
    "Blocker",
    "BlockerKind",
    "Conflict",
    "Event",
    "Evidence",
    "EvidenceKind",
    "Gate",
    "IdempotencyConflict",
    "IllegalTransition",
    "IntegrityError",
    "InvalidInput",
    "Kind",
    "Liveness",
    "NotAuthorized",
    "NotFound",
    "Packet",
    "Refused",
    "RuleViolation",
    "Run",
    "StaleLease",
    "State",
    "StopRules",
    "Store",
    "StoreError",
    "Verdict",
    "VersionConflict",
    "WaypostError",
    "apply",
    "fold",
    "open_store",
    "start",
]
