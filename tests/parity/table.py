"""The one table of scenarios, what each door offers, and which scenario runs at which
door: every scenario runs at every door that offers its operation, knows its actor (the
token actors exist at the token doors only) and can carry its inputs (`TAKES`).

A scenario is (who, what, on which run, with which inputs) and the class every door must
answer; anything but ok (or a stop hook's answer) must leave the store as it was. Where
a door answers otherwise and its fix is under way, the row says so with a strict xfail:
the fix makes it pass, and the marker goes in the same commit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from .terms import (
    HOSTILE,
    LOCAL_ACTORS,
    NESTED,
    REMOTE_DOORS,
    STRANGER,
    TOKEN_DOORS,
    WORKER,
    Actor,
    Carry,
    Cls,
    Door,
    Hostile,
    Op,
    Setup,
    Wire,
)

WRITES: Final = frozenset({
    Op.CLAIM, Op.RESUME, Op.HEARTBEAT, Op.BLOCK, Op.UNBLOCK, Op.ARTIFACT, Op.SKIP, Op.REPORT,
    Op.CHECK, Op.COMMAND, Op.READY, Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.TRANSFER,
    Op.CANCEL, Op.RETARGET, Op.ADD_GATE, Op.ADOPT_GATE})
READS: Final = frozenset({Op.READ, Op.LIST, Op.WAIT})
OWNER_VERBS: Final = frozenset({Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.TRANSFER, Op.CANCEL,
                                Op.RETARGET, Op.ADOPT_GATE})
# MCP has no hand-typed evidence (a tool runs or checks it); the board offers the owner's
# five actions; the SDK lists nothing (the store does: Store.list_runs); a hook door answers
# stops only. The handoff (start with a worker, claim, transfer, resume) is at every door
# but the board's.
MCP_OPS: Final = frozenset({
    Op.START, Op.CLAIM, Op.RESUME, Op.TRANSFER, Op.HEARTBEAT, Op.BLOCK, Op.UNBLOCK,
    Op.ARTIFACT, Op.SKIP, Op.CHECK, Op.COMMAND, Op.READY, Op.REVIEW, Op.APPROVE, Op.CHANGES,
    Op.CANCEL, Op.RETARGET, Op.ADD_GATE, Op.ADOPT_GATE, Op.READ, Op.LIST, Op.WAIT, Op.INBOX})
OFFERS: Final[Mapping[Door, frozenset[Op]]] = {
    Door.SDK: WRITES | {Op.START, Op.READ, Op.WAIT},
    Door.SDK_BLOCK: frozenset({Op.START}),
    Door.CLI: WRITES | {Op.START, Op.READ, Op.LIST, Op.WAIT, Op.INBOX},
    Door.MCP_STDIO: MCP_OPS,
    Door.MCP_HTTP: MCP_OPS,
    Door.HTTP: WRITES | {Op.START, Op.READ, Op.LIST, Op.WAIT, Op.INBOX},
    Door.BOARD: frozenset({Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.CANCEL, Op.ADOPT_GATE,
                           Op.UNBLOCK, Op.TRANSFER, Op.READ, Op.LIST}),
    Door.HOOK_CLI: frozenset({Op.STOP}),
    Door.HOOK_HTTP: frozenset({Op.STOP}),
    Door.SLACK: frozenset({Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.CANCEL}),
    Door.GITHUB: frozenset({Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.CANCEL}),
}

_TEXT_DURATIONS: Final = {"max_silence": Carry.TEXT, "expect": Carry.TEXT,
                          "deadline": Carry.TEXT}
# the numbers each door takes, and how it carries them
TAKES: Final[Mapping[Door, Mapping[str, Carry]]] = {
    Door.SDK: {"progress": Carry.FLOAT, "epoch": Carry.INT, "max_silence": Carry.FLOAT,
               "expect": Carry.FLOAT, "deadline": Carry.TEXT, "timeout": Carry.FLOAT},
    Door.SDK_BLOCK: {"max_silence": Carry.FLOAT, "expect": Carry.FLOAT,
                     "deadline": Carry.TEXT},
    Door.CLI: {"progress": Carry.TEXT, "epoch": Carry.TEXT, "timeout": Carry.TEXT,
               **_TEXT_DURATIONS},
    Door.MCP_STDIO: {"progress": Carry.MCP, "timeout": Carry.MCP, "line": Carry.LINE,
                     **_TEXT_DURATIONS},
    Door.MCP_HTTP: {"progress": Carry.MCP, "timeout": Carry.MCP, **_TEXT_DURATIONS},
    Door.HTTP: {"progress": Carry.JSON, "epoch": Carry.JSON, **_TEXT_DURATIONS},
}


@dataclass(frozen=True)
class Scenario:
    name: str
    op: Op
    actor: Actor
    setup: Setup
    expect: Cls
    # the class at the token doors where a remote caller must be refused what would run
    # a command, read a file or reach a host from the server (README: "nothing runs on
    # the server because a remote caller asked")
    remote: Cls | None = None
    args: Mapping[str, object] = field(default_factory=dict)
    # None: unchanged when it is refused (anything but ok or a stop's answer), or a read
    unchanged: bool | None = None
    runs_nothing: bool = False  # True: not even an answer of ok runs its command
    xfail: Mapping[Door, str] = field(default_factory=dict)
    at: Mapping[Door, Cls] = field(default_factory=dict)  # a door's own answer, over these
    only: frozenset[Door] = frozenset()  # the doors it runs at (empty: all that apply)

    def expected(self, door: Door) -> Cls:
        if door in self.at:
            return self.at[door]
        return self.remote if self.remote is not None and door in REMOTE_DOORS else self.expect

    def keeps_store(self, door: Door) -> bool:
        if self.unchanged is not None:
            return self.unchanged
        return self.op in READS or self.expected(door) not in (Cls.OK, Cls.MAY_STOP, Cls.GO_ON)

    def applies(self, door: Door) -> bool:
        if self.op not in OFFERS[door] or (self.only and door not in self.only):
            return False
        if self.actor not in LOCAL_ACTORS and door not in TOKEN_DOORS:
            return False
        takes = TAKES.get(door, {})
        return all(arg in takes and takes[arg].carries(value)
                   for arg, value in self.args.items() if isinstance(value, Hostile))


# the run each operation naturally acts on, and who naturally asks for it
NATURAL: Final[Mapping[Op, tuple[Setup, Actor]]] = {
    Op.START: (Setup.NONE, Actor.OWNER), Op.CLAIM: (Setup.WORKING, Actor.WORKER),
    Op.RESUME: (Setup.WORKING, Actor.WORKER), Op.HEARTBEAT: (Setup.WORKING, Actor.WORKER),
    Op.BLOCK: (Setup.WORKING, Actor.WORKER), Op.UNBLOCK: (Setup.FAILED_COMMAND, Actor.WORKER),
    Op.ARTIFACT: (Setup.WORKING, Actor.WORKER), Op.SKIP: (Setup.WORKING, Actor.WORKER),
    Op.REPORT: (Setup.WORKING, Actor.WORKER), Op.CHECK: (Setup.WORKING, Actor.WORKER),
    Op.COMMAND: (Setup.WORKING, Actor.WORKER), Op.READY: (Setup.WORKING, Actor.WORKER),
    Op.REVIEW: (Setup.READY, Actor.OWNER), Op.APPROVE: (Setup.REVIEWED, Actor.OWNER),
    Op.CHANGES: (Setup.READY, Actor.OWNER), Op.TRANSFER: (Setup.WORKING, Actor.OWNER),
    Op.CANCEL: (Setup.WORKING, Actor.OWNER), Op.RETARGET: (Setup.WORKING, Actor.OWNER),
    Op.ADD_GATE: (Setup.WORKING, Actor.WORKER),
    Op.ADOPT_GATE: (Setup.WORKERS_GATE, Actor.OWNER),
    Op.READ: (Setup.WORKING, Actor.OWNER), Op.LIST: (Setup.WORKING, Actor.OWNER),
    Op.WAIT: (Setup.READY, Actor.OWNER),
    Op.INBOX: (Setup.READY, Actor.OWNER),
    Op.STOP: (Setup.WORKING, Actor.WORKER),
}


def natural(op: Op, expect: Cls, *, actor: Actor | None = None, prefix: str = "",
            remote: Cls | None = None, args: Mapping[str, object] | None = None,
            unchanged: bool | None = None, xfail: Mapping[Door, str] | None = None,
            ) -> Scenario:
    """`op` on the run it naturally acts on, asked for by `actor` (else whom it is for);
    named PREFIX_OP (the prefix defaults to the actor)."""
    setup, who = NATURAL[op]
    acting = actor or who
    return Scenario(f"{prefix or acting}_{op}", op, acting, setup, expect, remote=remote,
                    args=args or {}, unchanged=unchanged, xfail=xfail or {})


def _happy() -> Iterator[Scenario]:
    """Each operation, asked for by whom it is for: what every door must let through
    (a driver that cannot reach its door fails here first)."""
    for op in Op:
        if op is Op.COMMAND:  # runs a command: never on the server for a remote caller
            yield natural(op, Cls.OK, remote=Cls.REFUSED)
        elif op is not Op.STOP:
            yield natural(op, Cls.OK)
    yield natural(Op.READ, Cls.OK, actor=Actor.WORKER)
    yield natural(Op.READ, Cls.OK, actor=Actor.STRANGER)  # an owner token reads other runs


def _not_the_owner() -> Iterator[Scenario]:
    """DESIGN §1: review, approve, changes, transfer, cancel and retarget are the owner's."""
    for op in sorted(OWNER_VERBS):
        for actor in (Actor.WORKER, Actor.STRANGER):
            yield natural(op, Cls.REFUSED, actor=actor)


def _narrow_tokens() -> Iterator[Scenario]:
    """The run's owner, holding a token whose role or run does not allow the operation
    (core/access: the role caps what the holder asks, before the run's rules)."""
    for actor in (Actor.OWNER_AS_VIEWER, Actor.OWNER_AS_WATCHER):
        for op in sorted(WRITES | {Op.START}):
            yield natural(op, Cls.REFUSED, actor=actor)
        yield natural(Op.READ, Cls.OK, actor=actor)
        yield natural(Op.LIST, Cls.OK, actor=actor)
    for op in sorted(OWNER_VERBS | {Op.START}):
        yield natural(op, Cls.REFUSED, actor=Actor.OWNER_AS_WORKER)
    yield natural(Op.BLOCK, Cls.OK, actor=Actor.OWNER_AS_WORKER)
    for op in sorted(WRITES | {Op.START, Op.READ}):
        yield natural(op, Cls.REFUSED, actor=Actor.OWNER_OTHER_RUN)
    yield natural(Op.LIST, Cls.OK, actor=Actor.OWNER_OTHER_RUN)
    # README, "Answering by email": a link's session acts on its own run alone
    for op in sorted(OFFERS[Door.BOARD] - {Op.LIST}):
        setup, _ = NATURAL[op]
        yield Scenario(f"owner_by_link_{op}", op, Actor.OWNER_BY_LINK, setup, Cls.REFUSED,
                       only=frozenset({Door.BOARD}))


def _no_live_token() -> Iterator[Scenario]:
    """README: a missing, unknown, expired or revoked token gets 401 and changes nothing.
    (A stop hook answers every stop, its own failures as refusals: see `_stops`.)"""
    for actor in (Actor.NO_TOKEN, Actor.UNKNOWN_TOKEN, Actor.REVOKED_TOKEN,
                  Actor.EXPIRED_TOKEN):
        for op in (Op.START, Op.HEARTBEAT, Op.APPROVE, Op.ADD_GATE, Op.READ, Op.LIST):
            yield natural(op, Cls.UNAUTHENTICATED, actor=actor)


def _stale_leases() -> Iterator[Scenario]:
    """DESIGN §2: after a takeover, the old worker's writes are refused with a clear error
    (StaleLease) and change nothing."""
    for op in (Op.HEARTBEAT, Op.BLOCK, Op.ARTIFACT, Op.SKIP, Op.REPORT, Op.CHECK, Op.READY,
               Op.COMMAND, Op.ADD_GATE):
        remote = Cls.REFUSED if op is Op.COMMAND else None
        yield Scenario(f"old_epoch_{op}", op, Actor.WORKER, Setup.RESTARTED, Cls.STALE_LEASE,
                       remote=remote)
    for op in (Op.HEARTBEAT, Op.READY):
        yield Scenario(f"taken_over_{op}", op, Actor.WORKER, Setup.TAKEN_OVER,
                       Cls.STALE_LEASE)


def _owner_blockers() -> Iterator[Scenario]:
    """DESIGN §1: the owner resolves missing_input, permission_boundary, deadline_passed
    and delivery_failed; the lease-holding worker is refused them at every door."""
    for setup in (Setup.MISSING_INPUT, Setup.PERMISSION_BOUNDARY, Setup.DEADLINE_PASSED,
                  Setup.DELIVERY_FAILED):
        yield Scenario(f"worker_unblocks_{setup}", Op.UNBLOCK, Actor.WORKER, setup,
                       Cls.REFUSED)
        yield Scenario(f"owner_unblocks_{setup}", Op.UNBLOCK, Actor.OWNER, setup, Cls.OK)


def _hostile_numbers() -> Iterator[Scenario]:
    """NaN, infinities, huge and empty numbers are refused as invalid at every door that
    takes the number, and change nothing."""
    for number in HOSTILE:
        yield natural(Op.HEARTBEAT, Cls.INVALID, prefix=f"progress_{number.name}",
                      args={"progress": number})
        yield natural(Op.COMMAND, Cls.INVALID, prefix=f"timeout_{number.name}",
                      args={"timeout": number})
        for duration in ("max_silence", "expect", "deadline"):
            yield natural(Op.START, Cls.INVALID, prefix=f"{duration}_{number.name}",
                          args={duration: number})
        yield natural(Op.HEARTBEAT, Cls.INVALID, prefix=f"epoch_{number.name}",
                      args={"epoch": number})


def _unreadable_lines() -> Iterator[Scenario]:
    """A door that reads JSON-RPC lines (MCP stdio) answers a line it cannot decode, nested
    200,000 deep, with an error (JSON-RPC's parse error: invalid) and serves the next one;
    the call it could not read changes nothing."""
    yield natural(Op.HEARTBEAT, Cls.INVALID, prefix="nested_line", args={"line": NESTED})


def _remote_callers() -> Iterator[Scenario]:
    """What runs on the machine of the door: at a local door, it runs; a remote caller is
    refused (nothing runs, nothing is stored) unless the server allows exec."""
    runs_here = {"runs_here": True}
    yield natural(Op.CHECK, Cls.OK, remote=Cls.REFUSED, prefix="command_check",
                  args=runs_here)
    yield natural(Op.START, Cls.OK, remote=Cls.REFUSED, prefix="exec_target", args=runs_here)
    yield natural(Op.RETARGET, Cls.OK, remote=Cls.REFUSED, prefix="exec_target",
                  args=runs_here)
    yield Scenario("command_gate_review", Op.REVIEW, Actor.OWNER, Setup.GATED, Cls.OK,
                   remote=Cls.REFUSED)


def _gates() -> Iterator[Scenario]:
    """DESIGN §3: gates are the owner's. A gate the worker declared is shown as the
    worker's: review runs none of it (at any door) and approval waits for the owner to
    adopt or waive it; the worker declares gates only before it submits the result."""
    yield Scenario("workers_gate_review", Op.REVIEW, Actor.OWNER, Setup.WORKERS_GATE_READY,
                   Cls.OK, runs_nothing=True)
    yield Scenario("workers_gate_approve", Op.APPROVE, Actor.OWNER,
                   Setup.WORKERS_GATE_REVIEWED, Cls.REFUSED)
    yield natural(Op.ADD_GATE, Cls.OK, actor=Actor.OWNER)
    yield Scenario("worker_add_gate_after_ready", Op.ADD_GATE, Actor.WORKER, Setup.READY,
                   Cls.REFUSED)
    yield Scenario("adopt_own_gate", Op.ADOPT_GATE, Actor.OWNER, Setup.GATED, Cls.REFUSED,
                   args={"gate": "tests"})
    yield natural(Op.ADOPT_GATE, Cls.NOT_FOUND, prefix="adopt_missing_gate",
                  args={"gate": "nosuchgate"})
    yield natural(Op.ADD_GATE, Cls.OK, remote=Cls.REFUSED, prefix="reaching_out",
                  args={"reaches_out": True})


def _rules() -> Iterator[Scenario]:
    """The state machine, missing things and reused keys: the same answer everywhere."""
    for op in (Op.READ, Op.HEARTBEAT, Op.APPROVE, Op.CANCEL):
        yield Scenario(f"missing_run_{op}", op, NATURAL[op][1], Setup.MISSING, Cls.NOT_FOUND)
    yield natural(Op.UNBLOCK, Cls.NOT_FOUND, prefix="missing_blocker",
                  args={"blocker": "b9"})
    yield Scenario("ready_twice", Op.READY, Actor.WORKER, Setup.READY, Cls.REFUSED)
    yield Scenario("approve_unreviewed", Op.APPROVE, Actor.OWNER, Setup.READY, Cls.REFUSED)
    yield Scenario("approve_in_progress", Op.APPROVE, Actor.OWNER, Setup.WORKING, Cls.REFUSED)
    yield Scenario("heartbeat_cancelled", Op.HEARTBEAT, Actor.WORKER, Setup.CANCELLED,
                   Cls.REFUSED)
    yield Scenario("cancel_cancelled", Op.CANCEL, Actor.OWNER, Setup.CANCELLED, Cls.REFUSED)
    yield Scenario("key_reused", Op.START, Actor.OWNER, Setup.KEYED, Cls.CONFLICT,
                   args={"title": "Another title under the same key"})
    # README, "A run you can hand to anyone": an imported run is read-only at every door
    yield Scenario("imported_approve", Op.APPROVE, Actor.OWNER, Setup.IMPORTED, Cls.REFUSED)


def _stops() -> Iterator[Scenario]:
    """The stop hooks: the same decision at both. A hook answers every stop (a failure of
    its own, a missing or dead token included, is a refused stop: the agent goes on), and
    counts a refusal on the run only for whom may write the run (README, the hook routes):
    a viewer's, a watcher's, another run's token's and an unknown or missing token's are
    counted in the server's memory, never in the store."""
    yield Scenario("working_stop", Op.STOP, Actor.WORKER, Setup.WORKING, Cls.GO_ON)
    yield Scenario("ready_stop", Op.STOP, Actor.WORKER, Setup.READY, Cls.MAY_STOP)
    yield Scenario("own_blocker_stop", Op.STOP, Actor.WORKER, Setup.FAILED_COMMAND, Cls.GO_ON)
    yield Scenario("owner_blocker_stop", Op.STOP, Actor.WORKER, Setup.MISSING_INPUT,
                   Cls.MAY_STOP)
    yield Scenario("no_run_stop", Op.STOP, Actor.WORKER, Setup.NONE, Cls.MAY_STOP)
    for actor in (Actor.OWNER_AS_VIEWER, Actor.OWNER_AS_WATCHER):
        yield natural(Op.STOP, Cls.GO_ON, actor=actor, unchanged=True)
        yield Scenario(f"{actor}_ready_stop", Op.STOP, actor, Setup.READY, Cls.MAY_STOP,
                       unchanged=True)
    # a token that may not read the run is refused, whatever the run's state
    yield Scenario("owner_other_run_ready_stop", Op.STOP, Actor.OWNER_OTHER_RUN, Setup.READY,
                   Cls.GO_ON, unchanged=True)
    for actor in (Actor.NO_TOKEN, Actor.UNKNOWN_TOKEN):
        yield Scenario(f"{actor}_ready_stop", Op.STOP, actor, Setup.READY, Cls.GO_ON,
                       unchanged=True)
    for actor in (Actor.REVOKED_TOKEN, Actor.EXPIRED_TOKEN):  # counted per token, durably
        yield Scenario(f"{actor}_ready_stop", Op.STOP, actor, Setup.READY, Cls.GO_ON)


def _readers() -> Iterator[Scenario]:
    """README, what each reader sees: the run's owner and its lease holder see everything
    at every door; on an authenticated door a viewer's or a watcher's token, or another
    holder's, sees the public view (no private summary, no secret in a note, no evidence
    output, no artifact bytes). On a local store the reader is self-asserted: everything."""
    for actor in (Actor.OWNER, Actor.WORKER, Actor.OWNER_AS_WORKER):
        yield Scenario(f"{actor}_reads_private", Op.READ, actor, Setup.PRIVATE, Cls.SEES_ALL)
    yield Scenario("stranger_reads_private", Op.READ, Actor.STRANGER, Setup.PRIVATE,
                   Cls.SEES_ALL, remote=Cls.PUBLIC)
    for actor in (Actor.OWNER_AS_VIEWER, Actor.OWNER_AS_WATCHER):
        yield Scenario(f"{actor}_reads_private", Op.READ, actor, Setup.PRIVATE, Cls.PUBLIC)


def _late_workers() -> Iterator[Scenario]:
    """A worker whose process starts after the watchdog blocked its run as worker_silent
    takes it over at every door: its claim (or resume) ends the silence, with the same
    events (tests/parity/test_late_claim.py compares what each door leaves)."""
    for op in (Op.CLAIM, Op.RESUME):
        yield Scenario(f"late_worker_{op}", op, Actor.WORKER, Setup.SILENT, Cls.OK)
        yield Scenario(f"owner_{op}_silent", op, Actor.OWNER, Setup.SILENT, Cls.OK)


HANDING: Final = frozenset({Door.SDK, Door.CLI, Door.MCP_STDIO, Door.MCP_HTTP, Door.HTTP})


def _handoffs() -> Iterator[Scenario]:
    """The handoff at every door that offers it (tests/parity/test_handoff.py runs it end
    to end): the owner starts a run for a worker it names, the worker claims it, nobody
    else takes its live lease, and the owner hands an authority over (approval to another
    owner; the takeover to another actor, who may then take the live lease)."""
    yield Scenario("owner_start_for_a_worker", Op.START, Actor.OWNER, Setup.NONE, Cls.OK,
                   args={"worker": WORKER}, only=HANDING)
    yield Scenario("stranger_claim_live_lease", Op.CLAIM, Actor.STRANGER, Setup.WORKING,
                   Cls.REFUSED)
    yield Scenario("stranger_resume_live_lease", Op.RESUME, Actor.STRANGER, Setup.WORKING,
                   Cls.REFUSED)
    yield Scenario("owner_transfer_takeover", Op.TRANSFER, Actor.OWNER, Setup.WORKING, Cls.OK,
                   args={"authority": "takeover", "to": STRANGER})
    yield Scenario("owner_transfer_to_another_owner", Op.TRANSFER, Actor.OWNER,
                   Setup.READY, Cls.OK, args={"authority": "approve", "to": "bob"})


def _request_edge() -> Iterator[Scenario]:
    """README, "What a request must be": the board's cookie signs in to the board's pages
    alone (401 at the API and MCP over HTTP, a refused stop at the hook route); a body sent
    as another media type than the route's is refused (415); a deeply nested body is refused
    (400) after the token is checked (401 without one), never a failure of the server."""
    by_cookie = {Door.HTTP: Cls.UNAUTHENTICATED, Door.MCP_HTTP: Cls.UNAUTHENTICATED}
    for op in (Op.START, Op.CANCEL, Op.APPROVE, Op.REVIEW, Op.CHANGES, Op.RETARGET,
               Op.ADOPT_GATE, Op.READ, Op.LIST):
        setup, _ = NATURAL[op]
        yield Scenario(f"by_cookie_{op}", op, Actor.OWNER_BY_COOKIE, setup, Cls.OK,
                       at=by_cookie)
    yield Scenario("by_cookie_ready_stop", Op.STOP, Actor.OWNER_BY_COOKIE, Setup.READY,
                   Cls.GO_ON, unchanged=True)
    http = frozenset({Door.HTTP})
    for wire in (Wire.TEXT_PLAIN, Wire.FORM, Wire.MULTIPART, Wire.UNTYPED, Wire.DEEP):
        for op in (Op.START, Op.HEARTBEAT, Op.CANCEL, Op.UNBLOCK):
            setup, actor = NATURAL[op]
            yield Scenario(f"{wire}_{op}", op, actor, setup, Cls.INVALID,
                           args={"wire": wire}, only=http)
    for wire in (Wire.TEXT_PLAIN, Wire.FORM, Wire.MULTIPART, Wire.UNTYPED):  # an upload:
        yield Scenario(f"{wire}_artifact", Op.ARTIFACT, Actor.WORKER, Setup.WORKING,
                       Cls.OK if wire is Wire.UNTYPED else Cls.INVALID, args={"wire": wire},
                       only=http)  # bytes, as application/octet-stream or untyped
    for op in (Op.START, Op.HEARTBEAT, Op.CANCEL):  # the token first: 401, never a 500
        yield Scenario(f"deep_no_token_{op}", op, Actor.NO_TOKEN, NATURAL[op][0],
                       Cls.UNAUTHENTICATED, args={"wire": Wire.DEEP}, only=http)
    for actor in (Actor.WORKER, Actor.NO_TOKEN):  # a hook answers all: a refused stop
        for wire in (Wire.DEEP, Wire.TEXT_PLAIN):
            yield Scenario(f"{wire}_{actor}_ready_stop", Op.STOP, actor, Setup.READY,
                           Cls.GO_ON, args={"wire": wire}, unchanged=True,
                           only=frozenset({Door.HOOK_HTTP}))


def _waits() -> Iterator[Scenario]:
    """`wait` (README): a read that returns once the run needs the parent; the same
    refusals as a read, decided before any waiting (each run here already needs the owner,
    so a wait that worked answers at once: the doors' timeouts are hang guards)."""
    yield Scenario("owner_blocker_wait", Op.WAIT, Actor.OWNER, Setup.MISSING_INPUT, Cls.OK)
    yield Scenario("worker_waits_for_review", Op.WAIT, Actor.WORKER, Setup.READY, Cls.OK)
    yield Scenario("missing_run_wait", Op.WAIT, Actor.OWNER, Setup.MISSING, Cls.NOT_FOUND)
    yield natural(Op.WAIT, Cls.REFUSED, actor=Actor.OWNER_OTHER_RUN)
    yield natural(Op.WAIT, Cls.OK, actor=Actor.OWNER_AS_VIEWER)
    for actor in (Actor.NO_TOKEN, Actor.REVOKED_TOKEN):
        yield natural(Op.WAIT, Cls.UNAUTHENTICATED, actor=actor)


def _inboxes() -> Iterator[Scenario]:
    """README, the inbox: every actor reads (and acknowledges) its own inbox, the news of
    the runs it owns, at every door that has one; on an authenticated door the reader is
    the token's holder, whatever its role or run (a narrow token lists less, never
    another's), a missing or dead token is refused (401) and the board's cookie is no
    token there."""
    for actor in (Actor.WORKER, Actor.STRANGER, Actor.OWNER_AS_VIEWER, Actor.OWNER_AS_WATCHER,
                  Actor.OWNER_AS_WORKER, Actor.OWNER_OTHER_RUN):
        yield natural(Op.INBOX, Cls.OK, actor=actor)
    for actor in (Actor.NO_TOKEN, Actor.UNKNOWN_TOKEN, Actor.REVOKED_TOKEN,
                  Actor.EXPIRED_TOKEN, Actor.OWNER_BY_COOKIE):
        yield natural(Op.INBOX, Cls.UNAUTHENTICATED, actor=actor)


def _bound_answers() -> Iterator[Scenario]:
    """Issue 34: an answer names the result it answers by its reviewed-result digest; one
    written before the result changed (here, before its review) is refused as a conflict
    (result_changed) at every door that offers it, the store unchanged, and the result's
    digest as it is now goes through."""
    for op in (Op.APPROVE, Op.CHANGES):
        yield Scenario(f"stale_digest_{op}", op, Actor.OWNER, Setup.REVIEWED, Cls.CONFLICT,
                       args={"reviewed": "stale"})
        yield Scenario(f"current_digest_{op}", op, Actor.OWNER, Setup.REVIEWED, Cls.OK,
                       args={"reviewed": "current"})


SCENARIOS: Final[tuple[Scenario, ...]] = (
    *_happy(), *_not_the_owner(), *_narrow_tokens(), *_no_live_token(), *_stale_leases(),
    *_owner_blockers(), *_hostile_numbers(), *_unreadable_lines(), *_remote_callers(),
    *_gates(), *_rules(), *_stops(), *_readers(), *_late_workers(), *_handoffs(),
    *_request_edge(), *_waits(), *_inboxes(), *_bound_answers())
