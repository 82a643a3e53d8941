"""What every door's driver is: one method per operation the door offers, named after the
operation (`Op`), taking the `Call` and returning the outcome class. A door that does not
offer an operation has no method for it; `table.OFFERS` says the same, and a completeness
test holds the two equal."""

from __future__ import annotations

from typing import ClassVar, Final

from waypost.core.reviewed import result_digest
from waypost.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    Refused,
    StaleLease,
    Unauthenticated,
    WaypostError,
)

from .terms import Call, Cls, Ctx, Door, Hostile, Op
from .world import World

TITLE = "Fix the flaky login test"
WAIT_S = 20  # a wait's hang guard: every scenario's run needs the parent already
TARGET = "none:"
RETARGET = "mailto:ops@example.com"
ARTIFACT = b"# Notes\n\nThe login race is fixed: the session is created before the test reads it.\n"
CHECK = "no-private"  # a check every door runs (nothing on the server's machine)


# what the `private` run holds (`world._private`): the marks only its owner, lease holder
# and transferees may see, and the public summary every reader sees
PRIVATE_SUMMARY = "PrivateSummaryMark7731"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"  # in w1's heartbeat note, as api_key=...
OUTPUT = "CommandOutputMark5523"  # a recorded command's output tail
BYTES = "ArtifactBytesMark9014"  # a stored artifact's bytes
PUBLIC_SUMMARY = "PublicSummaryMark3380"
PRIVATE_MARKS = (PRIVATE_SUMMARY, SECRET)  # every door shows both to whom sees all
NEVER_PUBLIC = (PRIVATE_SUMMARY, SECRET, OUTPUT, BYTES)


def seen(*answers: str) -> Cls:
    """A successful read's class: ok for any run but a `private` one; of that, what the
    answers (all a door shows of one read) showed: everything, or the public view. An
    answer that shows some of what is private and hides the rest is a leak, and fails."""
    text = "\n".join(answers)
    if PUBLIC_SUMMARY not in text:
        return Cls.OK
    if all(mark in text for mark in PRIVATE_MARKS):
        return Cls.SEES_ALL
    leaked = [mark for mark in NEVER_PUBLIC if mark in text]
    assert not leaked, f"a read showed {leaked} of the private view and hid the rest"
    return Cls.PUBLIC


# the exception tree (waypost.errors) as outcome classes, most specific first
CLASS_OF_ERROR: Final = ((StaleLease, Cls.STALE_LEASE), (Unauthenticated, Cls.UNAUTHENTICATED),
                         (Refused, Cls.REFUSED), (InvalidInput, Cls.INVALID),
                         (NotFound, Cls.NOT_FOUND), (Conflict, Cls.CONFLICT))


def _error_classes() -> dict[str, type[WaypostError]]:
    found: dict[str, type[WaypostError]] = {}
    todo: list[type[WaypostError]] = [WaypostError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo += cls.__subclasses__()
    return found


ERROR_OF_CODE: Final = _error_classes()  # every error code a door may answer, its class


def class_of(error: type[WaypostError]) -> Cls:
    """The outcome class of an error of the tree; any other (a bug, a busy store) is no
    answer of the rules, and fails the test."""
    for raised, cls in CLASS_OF_ERROR:
        if issubclass(error, raised):
            return cls
    raise AssertionError(f"{error.__name__} ({error.code}) is no answer of the rules")


class Driver:
    """A door, over one world (a store of one backend)."""

    door: ClassVar[Door]

    def __init__(self, world: World) -> None:
        self.world = world

    def call(self, op: Op, call: Call) -> Cls:
        method = getattr(self, op.value)
        outcome: Cls = method(call)
        return outcome

    def hold(self, ctx: Ctx) -> None:
        """Take the lease as w1 through this door, when the door holds epochs itself."""

    def close(self) -> None:
        """Stop whatever the driver started."""


def offered(driver: type[Driver]) -> frozenset[Op]:
    """The operations `driver` has a method for."""
    return frozenset(op for op in Op if callable(getattr(driver, op.value, None)))


def number_text(call: Call, arg: str, default: str | None) -> str | None:
    """A number (or duration) as text: the scenario's hostile one, else `default`."""
    given = call.hostile(arg)
    if given is None:
        return default
    return "+" + given.text if arg == "deadline" else given.text


def number(call: Call, arg: str, default: float | None) -> float | None:
    """A number as the library takes it: the scenario's hostile one, else `default`."""
    given = call.hostile(arg)
    return default if given is None else given.value


def epoch_text(call: Call) -> str | None:
    epoch = call.epoch()
    return epoch.text if isinstance(epoch, Hostile) else None if epoch is None else str(epoch)


def worker(call: Call) -> str | None:
    """The worker a start names (None: the door's default, the actor who starts it)."""
    found = call.args.get("worker")
    return None if found is None else str(found)


def transfer(call: Call) -> tuple[str, str]:
    """The authority a transfer hands over, and to whom: approve to bob unless the scenario
    names another."""
    return str(call.args.get("authority", "approve")), str(call.args.get("to", "bob"))


NEVER_REVIEWED = "0" * 64  # a digest no result ever had


def reviewed(call: Call, world: World) -> str | None:
    """The reviewed-result digest an answer names: the scenario's (`stale`: the one its
    result had before its review; `current`: the result's now), else None (the door's
    default: the result as it stands)."""
    which = call.args.get("reviewed")
    if which is None:
        return None
    return call.ctx.stale if which == "stale" else shown(world, call.ctx.run)


def shown(world: World, run: str) -> str:
    """The digest a run's page shows now (which its forms carry): one no result had when
    the run has none, or is missing, so the rules answer as they would."""
    try:
        return result_digest(world.store.get(run)) or NEVER_REVIEWED
    except NotFound:
        return NEVER_REVIEWED


def title(call: Call) -> str:
    return str(call.args.get("title", TITLE))


def blocker(call: Call) -> str:
    return str(call.args.get("blocker", call.ctx.blocker))


GATE = "lint"  # the gate an add_gate declares


def gate_check(call: Call) -> str:
    """The check a declared gate names: a command (recorded, run only at the owner's
    review), or a URL reaching a host no server lists."""
    if call.args.get("reaches_out"):
        return "http:https://example.com/health"
    return f"command:touch {call.ctx.side}"


def gate_name(call: Call) -> str:
    """The gate to adopt: the one the worker declared, unless the scenario names another."""
    return str(call.args.get("gate", call.ctx.gate))


def check_spec(call: Call) -> str:
    """The check to run: a command that would leave a file behind, or one that runs
    nothing anywhere."""
    return f"command:touch {call.ctx.side}" if call.args.get("runs_here") else CHECK


def target(call: Call, default: str = TARGET) -> str:
    """The target a start or retarget names: an exec: target (which would run a command
    on the relay) when the scenario asks for one."""
    return f"exec:touch {call.ctx.side}" if call.args.get("runs_here") else default
