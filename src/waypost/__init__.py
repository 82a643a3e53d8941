"""waypost: checkpoint packets for long-running agent work.

    store = waypost.open_store("sqlite:///work.db")
    run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                           target="file:result.md", kind=waypost.Kind.LONG_RUNNING,
                           max_silence=1800)
    worker = waypost.Run(store, run.id, actor="worker-1")
    worker.claim()
    worker.heartbeat(note="reproduced", progress=0.3)

or, around a worker's whole job (heartbeats while it runs; an exception blocks the run):

    with waypost.run("Fix the flaky test", owner="alice", target="file:result.md",
                     max_silence=1800) as run:
        run.evidence(["pytest", "-q"], kind="test")
        run.ready("the test no longer flakes")

The package, room by room (ARCHITECTURE.md draws them and how a request flows):

    errors.py model/ events.py durations.py config.py inputs.py display.py   the vocabulary
    core/ system/ store/ delivery/ usecases/ hooks/ sdk/                     the rooms
    cli/ http/ mcp/                                                          the doors
    receiver.py watchdog.py   public aliases of documented paths; __main__.py `python -m`
"""

import typing

if typing.TYPE_CHECKING:
    from waypost.core.machine import apply, fold
    from waypost.errors import (
        Conflict,
        DiskFull,
        IdempotencyConflict,
        IllegalTransition,
        IntegrityError,
        InvalidInput,
        NotAuthorized,
        NotFound,
        Refused,
        RuleViolation,
        StaleLease,
        StoreBusy,
        StoreError,
        StoreUnreachable,
        VersionConflict,
        WaypostError,
    )
    from waypost.events import Event
    from waypost.model import (
        Artifact,
        ArtifactRole,
        Assurance,
        Authority,
        Blocker,
        BlockerKind,
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
    from waypost.sdk.aio import arun
    from waypost.sdk.block import run
    from waypost.store import Store, open_store
    from waypost.usecases.runs import Run
    from waypost.usecases.starting import start
    from waypost.usecases.waiting import wait

__all__ = [
    "Artifact",
    "ArtifactRole",
    "Assurance",
    "Authority",
    "Blocker",
    "BlockerKind",
    "Conflict",
    "DiskFull",
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
    "StoreBusy",
    "StoreError",
    "StoreUnreachable",
    "Verdict",
    "VersionConflict",
    "WaypostError",
    "apply",
    "arun",
    "fold",
    "open_store",
    "run",
    "start",
    "wait",
]

# Where each public name lives. They are imported on first use, so that a command that needs
# only part of the library (`waypost show` reads, it never writes) loads only that part.
_HOMES = {
    "waypost.errors": ("Conflict", "DiskFull", "IdempotencyConflict", "IllegalTransition",
                       "IntegrityError", "InvalidInput", "NotAuthorized", "NotFound", "Refused",
                       "RuleViolation", "StaleLease", "StoreBusy", "StoreError", "StoreUnreachable",
                       "VersionConflict", "WaypostError"),
    "waypost.core.machine": ("apply", "fold"),
    "waypost.events": ("Event",),
    "waypost.model": ("Artifact", "ArtifactRole", "Assurance", "Authority", "Blocker",
                      "BlockerKind", "Evidence", "EvidenceKind", "Gate", "Kind", "Liveness",
                      "Packet", "State", "StopRules", "Verdict"),
    "waypost.usecases.runs": ("Run",),
    "waypost.usecases.starting": ("start",),
    "waypost.usecases.waiting": ("wait",),
    "waypost.sdk.block": ("run",),
    "waypost.sdk.aio": ("arun",),
    "waypost.store": ("Store", "open_store"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'waypost' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
