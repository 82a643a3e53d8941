"""An answer bound to what was reviewed: `approve` and `changes` name the result they answer
by its reviewed-result digest (`core.reviewed`), and a result that has changed since is
refused (`ResultChanged`) with what changed, before anything is written.

The digest is decided inside the write, against the packet the write is applied to: a new
result submitted between the owner's read and the commit is refused too (the version guard
makes the write decide again on the new packet). Without a digest (the CLI, SDK, MCP and
HTTP API, where it is optional) the answer binds to the result as it stands at the write.
Either way the `approved` event records the digest approved, which the relay checks again
before it sends the result (`delivery.relay`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final, Protocol

from waypost.core.reviewed import changes_since, matches, result_digest, short, typed
from waypost.durations import Clock
from waypost.errors import InvalidInput, ResultChanged, Step, step
from waypost.events import AnyEventData, Approved, ChangesRequested
from waypost.model import Packet, Waiver
from waypost.store.base import Store


class Run(Protocol):
    """Who answers (a `Run` handle): the store, the actor, its clock and lease epoch."""

    store: Store
    actor: str
    epoch: int | None
    clock: Clock

NEVER = "the result was never reviewed with that digest"
_VERB: Final = {Approved: "approve", ChangesRequested: "changes"}


def given(reviewed: str | None) -> str | None:
    """A digest as an answer gave it (`--reviewed`, a form, a tool's argument), decided
    before anything is read: None when none was given; InvalidInput when it is not one."""
    if reviewed is None:
        return None
    if not reviewed:
        raise InvalidInput("reviewed: no reviewed-result digest was given",
                           hint="reload the page (or `waypost review RUN`), look at the result, "
                                "then answer it")
    if typed(reviewed) is None:
        raise InvalidInput(
            f"reviewed: {reviewed[:80]!r} is not a reviewed-result digest (write sha256: and "
            "64 hex digits, or at least its first 12)",
            hint="`waypost review RUN` prints it (reviewed result: sha256:…); so do "
                 "`waypost show RUN` and the run's page on the board")
    return reviewed


def bound(run: Run, packet: Packet, reviewed: str | None, data: AnyEventData) -> str | None:
    """The digest the answer `data` (built with the current digest) binds to: the current
    one, when `reviewed` names it or none was given. Else the answer is refused: by the
    run's own rules first (who may, in which state: those say more than a digest), then by
    ResultChanged, saying what changed since `reviewed`."""
    digest = result_digest(packet)
    if reviewed is None or matches(reviewed, digest):
        return digest
    from waypost.core.history import make_event
    from waypost.core.machine import apply

    apply(packet, make_event(packet, packet.id, data, actor=run.actor, at=run.clock(),
                             epoch=run.epoch))
    raise changed(run.store, packet, reviewed, digest, verb=_VERB[type(data)])


def approved(run: Run, packet: Packet, waivers: Sequence[Waiver],
             reviewed: str | None, statement: str | None = None) -> Approved:
    """The `approved` event, carrying the digest approved (and the sha256 of the owner's
    signed approval statement, `usecases.cosign`)."""
    data = Approved(waivers=tuple(waivers), reviewed=result_digest(packet),
                    statement=statement)
    bound(run, packet, reviewed, data)
    return data


def changes_requested(run: Run, packet: Packet, reason: str,
                      reviewed: str | None) -> ChangesRequested:
    """The `changes_requested` event, once the result it answers is still the run's."""
    data = ChangesRequested(reason=reason)
    bound(run, packet, reviewed, data)
    return data


def changed(store: Store, packet: Packet, reviewed: str, digest: str | None, *,
            verb: str) -> ResultChanged:
    """The refusal of an answer to `reviewed` when the result is now `digest`: what changed
    since (`core.reviewed.changes_since`), and how to answer the result as it is now."""
    lines = changes_since(store.events(packet.id), reviewed)
    if lines is None:
        said = NEVER
    else:
        said = ("since then: " + "; ".join(lines)) if lines else "it has changed since"
    now = f"it is now {short(digest)}" if digest else "no result is submitted now"
    return ResultChanged(
        f"run {packet.id}: the result answered ({_shown(reviewed)}) is not the run's "
        f"result: {said}; {now}", steps=_steps(packet, digest, verb),
        hint="nothing was written: look at the result as it is now before answering it")


def _steps(packet: Packet, digest: str | None, verb: str) -> list[Step]:
    if digest is None:
        return [step("read", packet.id, why="see where the run is")]
    again = short(digest)
    return [step("review", packet.id, why="review the result as it is now"),
            step(verb, packet.id, reviewed=again, why=f"then {verb} it with its digest")]


def _shown(reviewed: str) -> str:
    hexes = typed(reviewed)
    return hexes[:12] if hexes else shlex.quote(reviewed[:80])
