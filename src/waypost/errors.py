"""The one exception root of waypost, and the exit code each branch maps to.

    WaypostError                    1  unexpected / backend failure
    ├── InvalidInput                2  malformed JSON, bad duration, unknown field
    ├── Refused                     3  the rules said no
    │   ├── IllegalTransition          the state machine has no such move
    │   ├── RuleViolation              the move exists but a precondition fails
    │   │   └── TooLarge                   bytes past a size limit (HTTP 413)
    │   ├── StaleLease                 a write carrying an old lease epoch
    │   ├── NotAuthorized              the actor may not do this
    │   ├── Unauthenticated            no valid token: unknown, expired or revoked
    │   └── IntegrityError             `verify` found a broken chain or fold
    ├── NotFound                    4  run, blocker, artifact or store missing (or a store
    │                                  this user may not read)
    ├── Conflict                    5  idempotency key reuse, version conflict
    │   ├── IdempotencyConflict
    │   ├── VersionConflict
    │   └── ResultChanged              an answer names a result that has changed since
    ├── StoreError                  1  the backend failed (the driver error is the cause)
    ├── StoreBusy                  75  the store stayed locked past the wait limit: try again
    ├── StoreUnreachable           75  the store's database server did not answer: try again
    └── DiskFull                   75  no space left for the write: free some, try again

Every error carries a stable `code`, a message saying what was refused and why, a `hint`
in words, and the next steps as data (`Step`: a verb every door shares, the run, the
arguments known and those to fill in, who should take it). Each door words a step its own
way, with one renderer of its own: the CLI a command line, MCP a tool call, the HTTP API a
route; `hint_with` joins the hint and the steps so worded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

# The verbs a next step may name: the operations every door offers (`core.access.Operation`
# names them for the tokens' roles) and the relay's `deliver`.
VERBS: Final = frozenset({
    "list", "read", "start", "claim", "resume", "heartbeat", "block", "unblock", "artifact",
    "evidence", "ready", "review", "approve", "changes", "transfer", "cancel", "retarget",
    "add_gate", "adopt_gate", "deliver"})
# What each verb cannot be called without, in the names the doors share (the HTTP API's
# body fields, the MCP tools' arguments, the CLI's options): a step that does not know
# them asks the caller to fill them in.
NEEDS: Final[Mapping[str, tuple[str, ...]]] = {
    "block": ("kind", "detail"), "unblock": ("blocker", "resolution"), "ready": ("summary",),
    "changes": ("reason",), "cancel": ("reason",), "retarget": ("target",),
    "transfer": ("authority", "to"), "artifact": ("name", "content"),
    "evidence": ("command",), "add_gate": ("name", "check"), "adopt_gate": ("name",)}
# Arguments that are a switch: given as "true", a boolean field in a structured request
# and a bare --flag on the command line.
FLAGS: Final = frozenset({"accept_duplicate"})
_FIELDS: Final = ("verb", "run", "args", "fill", "actor", "why")


class Step:
    """One next step after a refusal, as data: `verb` on `run` with `args`, the arguments
    named in `fill` still to be given, taken by `actor` (None: whoever was refused). `why`
    leads the step in words ("claim it again"). An `evidence` step runs a command unless
    its arguments or fill name a `check` or a `reason` (a skip). Frozen; keyword-only.
    (A plain class: this module loads before anything else, msgspec included.)"""

    __slots__ = _FIELDS
    verb: str
    run: str | None
    args: Mapping[str, str]
    fill: tuple[str, ...]
    actor: str | None
    why: str

    def __init__(self, *, verb: str, run: str | None = None,
                 args: Mapping[str, str] | None = None, fill: Sequence[str] = (),
                 actor: str | None = None, why: str = "") -> None:
        if verb not in VERBS:
            raise ValueError(f"no verb {verb!r} (known: {', '.join(sorted(VERBS))})")
        given = MappingProxyType({name: str(value) for name, value in (args or {}).items()})
        values = (verb, run, given, tuple(fill), actor, why)
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Step is frozen: cannot set {name}")

    def fields(self) -> tuple[dict[str, Any], list[str]]:
        """The step as the fields of a structured request (a tool call, a JSON body) and
        the fields to fill in: a command as a one-item list, a waiver as `waivers: {gate:
        reason}` (its reason empty while to be filled in: an empty one is refused)."""
        given: dict[str, Any] = {name: value == "true" if name in FLAGS else value
                                 for name, value in self.args.items()}
        if self.verb == "approve":
            if "gate" in given:
                given = {"waivers": {given.pop("gate"): given.pop("reason", "")}} | given
            fill = ["waivers" if n in ("gate", "reason") else n for n in self.fill]
            return given, list(dict.fromkeys(fill))
        if "command" in given:
            given["command"] = [given["command"]]
        return given, list(self.fill)

    @property
    def form(self) -> str:
        """The form of an `evidence` step: `check`, `skip` (it names a reason) or
        `command`; "" for any other verb."""
        if self.verb != "evidence":
            return ""
        named = {*self.args, *self.fill}
        return "check" if "check" in named else "skip" if "reason" in named else "command"

    def _key(self) -> tuple[Any, ...]:
        return (self.verb, self.run, tuple(self.args.items()), self.fill, self.actor, self.why)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Step) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _FIELDS if n != "args")
        return f"Step({shown}, args={dict(self.args)!r})"


def step(verb: str, run: str | None = None, *, why: str = "", actor: str | None = None,
         fill: Sequence[str] | None = None, **args: str) -> Step:
    """A `Step`; what the verb needs (`NEEDS`) and `args` does not give is to be filled in,
    unless `fill` says otherwise."""
    if fill is None:
        fill = [name for name in NEEDS.get(verb, ()) if name not in args]
    return Step(verb=verb, run=run, args=args, fill=fill, actor=actor, why=why)


class WaypostError(Exception):
    """waypost failed unexpectedly."""

    exit_code = 1
    code = "error"

    def __init__(self, message: str | None = None, *, hint: str = "",
                 steps: Sequence[Step] = ()) -> None:
        self.message = message or (self.__doc__ or "").strip()
        self.hint = hint
        self.steps = tuple(steps)
        super().__init__(self.message)

    def hint_with(self, render: Callable[[Step], str]) -> str:
        """The hint as a door words it: the words, then each step as `render` writes it."""
        parts = [self.hint] if self.hint else []
        parts += [f"{s.why}: {render(s)}" if s.why else render(s) for s in self.steps]
        return "; ".join(parts)

    def as_dict(self) -> dict[str, str]:
        """The error without its steps (for a refusal that names none)."""
        return {"code": self.code, "message": self.message, "hint": self.hint}


class InvalidInput(WaypostError):
    """The input is malformed."""

    exit_code = 2
    code = "invalid_input"


class TooDeep(InvalidInput):
    """JSON nested deeper than any request of waypost's needs (`inputs.MAX_NESTING`):
    refused from its bytes, before a decoder recurses into it."""

    code = "too_deep"


class UnsupportedMedia(InvalidInput):
    """A body sent as a media type the route does not take (a form or text/plain post to a
    JSON route: what a page of another site can send without asking)."""

    code = "unsupported_media_type"


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


class TooLarge(RuleViolation):
    """The bytes are larger than the limit allows; nothing was stored."""

    code = "too_large"


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


class ResultChanged(Conflict):
    """An answer (approve, request changes) names, by its reviewed-result digest, a result
    that is no longer the run's: the message says what changed since."""

    code = "result_changed"


class StoreError(WaypostError):
    """The store failed."""

    code = "store_error"


class StoreBusy(WaypostError):
    """The store is busy: another writer held it past the wait limit. Nothing was written;
    try again (exit 75 is EX_TEMPFAIL, so a caller can tell it from a bug)."""

    exit_code = 75
    code = "store_busy"


class StoreUnreachable(WaypostError):
    """The store's database server could not be reached (refused, timed out, gone): nothing
    was read or written. Start it or fix the URL, then try again (exit 75, EX_TEMPFAIL)."""

    exit_code = 75
    code = "store_unreachable"


class DiskFull(WaypostError):
    """The disk is full: nothing was written (whatever was committed before is intact).
    Free some space and try again (exit 75, EX_TEMPFAIL, like a busy store)."""

    exit_code = 75
    code = "disk_full"
