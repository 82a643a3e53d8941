"""The one exception root of waypost, and the exit code each branch maps to.

    WaypostError                    1  unexpected / backend failure
    ├── InvalidInput                2  malformed JSON, bad duration, unknown field
    ├── Refused                     3  the rules said no
    │   ├── IllegalTransition          the state machine has no such move
    │   ├── RuleViolation              the move exists but a precondition fails
    │   ├── StaleLease                 a write carrying an old lease epoch
    │   ├── NotAuthorized              the actor may not do this
    │   ├── Unauthenticated            no valid token: unknown, expired or revoked
    │   └── IntegrityError             `verify` found a broken chain or fold
    ├── NotFound                    4  run, blocker, artifact or store missing
    ├── Conflict                    5  idempotency key reuse, version conflict
    │   ├── IdempotencyConflict
    │   └── VersionConflict
    ├── StoreError                  1  the backend failed (the driver error is the cause)
    ├── StoreBusy                  75  the store stayed locked past the wait limit: try again
    └── DiskFull                   75  no space left for the write: free some, try again

Every error carries a stable `code`, a message saying what was refused and why, and a
`hint`: the next command to type.
"""

from __future__ import annotations


class WaypostError(Exception):
    """waypost failed unexpectedly."""

    exit_code = 1
    code = "error"

    def __init__(self, message: str | None = None, *, hint: str = "") -> None:
        self.message = message or (self.__doc__ or "").strip()
        self.hint = hint
        super().__init__(self.message)

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


class InvalidInput(WaypostError):
    """The input is malformed."""

    exit_code = 2
    code = "invalid_input"


class Refused(WaypostError):
    """The rules refused this."""

    exit_code = 3
    code = "refused"


class IllegalTransition(Refused):
    """The state machine has no such move."""

    code = "illegal_transition"


class RuleViolation(Refused):
    """The move is refused because a precondition does not hold."""

    code = "rule_violation"


class StaleLease(Refused):
    """The write carries a lease that is no longer current."""

    code = "stale_lease"


class NotAuthorized(Refused):
    """The actor may not do this."""

    code = "not_authorized"


class Unauthenticated(Refused):
    """No valid token came with the request: it is missing, unknown, expired or revoked."""

    code = "unauthenticated"


class IntegrityError(Refused):
    """The history does not verify."""

    code = "integrity"


class NotFound(WaypostError):
    """Not found."""

    exit_code = 4
    code = "not_found"


class Conflict(WaypostError):
    """Conflicting write."""

    exit_code = 5
    code = "conflict"


class IdempotencyConflict(Conflict):
    """The idempotency key was already used with other parameters."""

    code = "idempotency_conflict"


class VersionConflict(Conflict):
    """The packet changed since it was read."""

    code = "version_conflict"


class StoreError(WaypostError):
    """The store failed."""

    code = "store_error"


class StoreBusy(WaypostError):
    """The store is busy: another writer held it past the wait limit. Nothing was written;
    try again (exit 75 is EX_TEMPFAIL, so a caller can tell it from a bug)."""

    exit_code = 75
    code = "store_busy"


class DiskFull(WaypostError):
    """The disk is full: nothing was written (whatever was committed before is intact).
    Free some space and try again (exit 75, EX_TEMPFAIL, like a busy store)."""

    exit_code = 75
    code = "disk_full"
