"""The parity suite's words: the outcome classes every door's answer is mapped into, the
doors, the operations, who acts, the run a scenario starts from, and the hostile numbers.

Each door maps its own answer (an exception, an exit code and error code, an HTTP status
and error code, an MCP tool error, a board page, a hook's JSON) into one `Cls`, in one
function of its driver; the scenarios speak only these words.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from waypost.core.access import Operation


class Cls(enum.StrEnum):
    OK = "ok"  # done
    INVALID = "invalid"  # malformed or out of bounds (InvalidInput, exit 2, HTTP 400/413/422)
    REFUSED = "refused"  # the rules or the token's role said no (Refused, exit 3, 403/409)
    NOT_FOUND = "not_found"  # no such run or blocker (NotFound, exit 4, 404)
    CONFLICT = "conflict"  # an idempotency key reused with other parameters (exit 5, 409)
    STALE_LEASE = "stale_lease"  # a write under a lease that is no longer current
    # no live token (HTTP 401, the board's sign-in form): the one refusal decided before any
    # rule, kept apart from `refused` so that a door answering 403 for a revoked token shows
    UNAUTHENTICATED = "unauthenticated"
    MAY_STOP = "may_stop"  # a stop hook lets the agent stop
    # a read of a `private` run (`driver.seen`): what the answer showed of it
    SEES_ALL = "sees_all"  # the private summary and the note's secret, as stored
    PUBLIC = "public"  # the public view: neither, nor evidence output or artifact bytes
    GO_ON = "go_on"  # a stop hook refuses the stop: the agent must go on


class Door(enum.StrEnum):
    SDK = "sdk"  # waypost.start and waypost.Run, in this process
    SDK_BLOCK = "sdk_block"  # with waypost.run(...): the block around a worker's job
    CLI = "cli"  # waypost.cli.main(argv), in this process
    MCP_STDIO = "mcp_stdio"  # `waypost mcp --as ACTOR`, driven by the official client
    MCP_HTTP = "mcp_http"  # `waypost mcp --http`, a bearer token per actor
    HTTP = "http"  # the JSON API of `waypost serve`
    BOARD = "board"  # the board's form posts (cookie + CSRF) and pages
    HOOK_CLI = "hook_cli"  # `waypost hook stop --host claude`
    HOOK_HTTP = "hook_http"  # POST /hooks/claude/stop
    SLACK = "slack"  # a Slack button's click, POST /slack/actions, signed as Slack signs
    GITHUB = "github"  # a /waypost comment on the run's pull request, as GitHub delivers it


# the authenticated doors: the actor is a bearer token's holder, its role caps what it asks
TOKEN_DOORS: Final = frozenset({Door.MCP_HTTP, Door.HTTP, Door.BOARD, Door.HOOK_HTTP})
# the doors of `waypost serve`: what a remote caller asks, the server runs only as allowed
REMOTE_DOORS: Final = TOKEN_DOORS | {Door.SLACK, Door.GITHUB}


class Op(enum.StrEnum):
    START = "start"
    CLAIM = "claim"
    RESUME = "resume"
    HEARTBEAT = "heartbeat"
    BLOCK = "block"
    UNBLOCK = "unblock"
    ARTIFACT = "artifact"  # record bytes as an artifact
    SKIP = "skip"  # evidence: a check that could not run
    REPORT = "report"  # evidence: a verdict typed by hand
    CHECK = "check"  # evidence: a built-in check, run now
    COMMAND = "command"  # evidence: a command, run now
    READY = "ready"
    REVIEW = "review"
    APPROVE = "approve"
    CHANGES = "changes"
    TRANSFER = "transfer"
    CANCEL = "cancel"
    RETARGET = "retarget"
    ADD_GATE = "add_gate"  # declare another gate (a command one: recorded, run at review)
    ADOPT_GATE = "adopt_gate"  # the owner makes another's gate its own
    READ = "read"  # one run's packet
    WAIT = "wait"  # until the run needs the parent (a read that may block, bounded)
    LIST = "list"  # the runs
    INBOX = "inbox"  # the caller's inbox: listed, then acknowledged
    STOP = "stop"  # an agent host asks whether its agent may stop


# what each operation asks for in the token roles' terms (`core.access`); None: no role
OPERATION_OF: Final[Mapping[Op, Operation | None]] = {
    Op.START: Operation.START, Op.CLAIM: Operation.CLAIM, Op.RESUME: Operation.RESUME,
    Op.HEARTBEAT: Operation.HEARTBEAT, Op.BLOCK: Operation.BLOCK,
    Op.UNBLOCK: Operation.UNBLOCK, Op.ARTIFACT: Operation.ARTIFACT,
    Op.SKIP: Operation.EVIDENCE, Op.REPORT: Operation.EVIDENCE, Op.CHECK: Operation.EVIDENCE,
    Op.COMMAND: Operation.EVIDENCE, Op.READY: Operation.READY, Op.REVIEW: Operation.REVIEW,
    Op.APPROVE: Operation.APPROVE, Op.CHANGES: Operation.CHANGES,
    Op.TRANSFER: Operation.TRANSFER, Op.CANCEL: Operation.CANCEL,
    Op.RETARGET: Operation.RETARGET, Op.ADD_GATE: Operation.ADD_GATE,
    Op.ADOPT_GATE: Operation.ADOPT_GATE, Op.READ: Operation.READ, Op.LIST: Operation.LIST,
    Op.WAIT: Operation.READ,
    Op.INBOX: Operation.LIST,  # the holder's own runs, as its token may read them
    Op.STOP: None,  # the hook reads the session's run (READ) and counts as BLOCK
}


class Actor(enum.StrEnum):
    OWNER = "owner"  # alice, who owns every run (an owner token)
    WORKER = "worker"  # w1, who holds the lease (a worker token)
    STRANGER = "stranger"  # mallory: neither (an owner token, for runs mallory owns)
    # the token doors only: the run's owner holding a narrow token ...
    OWNER_AS_WORKER = "owner_as_worker"
    OWNER_AS_VIEWER = "owner_as_viewer"
    OWNER_AS_WATCHER = "owner_as_watcher"
    OWNER_OTHER_RUN = "owner_other_run"  # an owner token for another run only
    OWNER_BY_LINK = "owner_by_link"  # signed in by an emailed link to another run
    # ... and no live token at all
    NO_TOKEN = "no_token"
    UNKNOWN_TOKEN = "unknown_token"
    REVOKED_TOKEN = "revoked_token"
    EXPIRED_TOKEN = "expired_token"
    # the owner's live token sent as the board's cookie alone (no Authorization header): what
    # a page of another site makes a signed-in browser send; the board's own pages take it
    OWNER_BY_COOKIE = "owner_by_cookie"


LOCAL_ACTORS: Final = frozenset({Actor.OWNER, Actor.WORKER, Actor.STRANGER})
NO_LIVE_TOKEN: Final = frozenset({Actor.NO_TOKEN, Actor.UNKNOWN_TOKEN, Actor.REVOKED_TOKEN,
                                  Actor.EXPIRED_TOKEN})
OWNER, WORKER, STRANGER = "alice", "w1", "mallory"
# who each actor is, by name (the token's holder at the token doors)
NAME_OF: Final[Mapping[Actor, str]] = {
    Actor.WORKER: WORKER, Actor.STRANGER: STRANGER,
    **{a: OWNER for a in Actor if a not in (Actor.WORKER, Actor.STRANGER)}}


class Setup(enum.StrEnum):
    """The run a scenario acts on, built through the SDK before the call."""

    NONE = "none"  # no run (start makes one)
    KEYED = "keyed"  # a run started with an idempotency key
    MISSING = "missing"  # a run id that names nothing
    WORKING = "working"  # in_progress, w1 holds the lease, one reported evidence
    READY = "ready"  # working, then submitted: ready_for_review
    REVIEWED = "reviewed"  # ready, then reviewed by the owner (approvable)
    GATED = "gated"  # ready, with the owner's required gate that runs a command
    WORKERS_GATE = "workers_gate"  # working; w1 declared a gate that runs a command
    WORKERS_GATE_READY = "workers_gate_ready"  # that, then submitted
    WORKERS_GATE_REVIEWED = "workers_gate_reviewed"  # that, then reviewed by the owner
    CANCELLED = "cancelled"  # working, then cancelled by the owner
    RESTARTED = "restarted"  # working; w1 claimed again elsewhere: the held epoch is old
    TAKEN_OVER = "taken_over"  # working; the owner took the live lease over
    FAILED_COMMAND = "failed_command"  # blocked by w1's failed_command
    MISSING_INPUT = "missing_input"  # blocked by w1's missing_input
    PERMISSION_BOUNDARY = "permission_boundary"  # blocked by w1's permission_boundary
    DEADLINE_PASSED = "deadline_passed"  # blocked by the watchdog: the deadline passed
    DELIVERY_FAILED = "delivery_failed"  # approved, then the relay gave up: blocked
    # ready, with a secret in w1's heartbeat note, a private summary, a command's output
    # and an artifact's bytes that only the owner and the lease holder may see
    PRIVATE = "private"
    # started with no worker; the watchdog blocked it as worker_silent before any worker's
    # process started (a late worker claims it)
    SILENT = "silent"
    # reviewed in a store of its own, exported as a bundle and imported here: read-only
    IMPORTED = "imported"


class Wire(enum.StrEnum):
    """How a web door sends a request's body instead of JSON as application/json (the
    scenario's `wire` argument)."""

    TEXT_PLAIN = "text_plain"  # the JSON as text/plain: a cross-site page's plain post
    FORM = "form"  # application/x-www-form-urlencoded: an HTML form, curl's -d default
    MULTIPART = "multipart"  # multipart/form-data: an HTML form with a file
    UNTYPED = "untyped"  # no Content-Type at all
    DEEP = "deep"  # JSON arrays nested 100,000 levels deep, as application/json


DEEP_LEVELS: Final = 100_000


@dataclass(frozen=True)
class Hostile:
    """A number no door may take, as each door is given it: text (a flag, a duration), a
    JSON literal (sent as is: a hostile client writes NaN), the library's float and int
    (None: the library's types cannot say it), and whether the official MCP client can
    send it at all (it writes JSON, which has no NaN or infinity)."""

    name: str
    text: str
    json: str
    value: float | None
    integer: int | None = None
    mcp_sends: bool = True


HOSTILE: Final = (
    Hostile("nan", "nan", "NaN", math.nan, mcp_sends=False),
    Hostile("inf", "inf", "Infinity", math.inf, mcp_sends=False),
    Hostile("neg_inf", "-inf", "-Infinity", -math.inf, mcp_sends=False),
    Hostile("huge", "1e308", "1e308", 1e308),
    Hostile("huge_int", str(2**63), str(2**63), float(2**63), integer=2**63),
    Hostile("empty", "", '""', None),
)


NESTING: Final = 200_000
# a value nested 200,000 arrays deep: no door's decoder may recurse into it (the MCP stdio
# door takes it as a whole line's tool arguments, written raw, as a hostile client does)
NESTED: Final = Hostile("nested", "[" * NESTING + "]" * NESTING, "[" * NESTING + "]" * NESTING,
                        None, mcp_sends=False)


class Carry(enum.Enum):
    """How a door carries a number it is given."""

    TEXT = "text"  # as text: a flag, or a JSON string the door parses (durations)
    JSON = "json"  # as a JSON number (or whatever literal a hostile client writes)
    MCP = "mcp"  # as a JSON number the official MCP client serialises
    FLOAT = "float"  # as a Python float (the library)
    INT = "int"  # as a Python int (the library)
    LINE = "line"  # in a raw line of JSON-RPC the door reads (MCP stdio), written as is

    def carries(self, number: Hostile) -> bool:
        if self is Carry.FLOAT:
            return number.value is not None
        if self is Carry.INT:
            return number.integer is not None
        return number.mcp_sends if self is Carry.MCP else True


@dataclass(frozen=True)
class Ctx:
    """What the setup made for one scenario."""

    run: str = ""  # the run acted on ("" for a start)
    session: str = ""  # the agent host's session the run was started for
    blocker: str = ""  # its open blocker, when blocked
    epoch: int | None = None  # the lease epoch w1 was given (stale once restarted)
    key: str = ""  # the idempotency key it was started with (KEYED)
    gate: str = ""  # the gate someone other than the owner declared
    stale: str = ""  # a reviewed-result digest its result had before its review
    side: Path = field(default_factory=Path)  # a file a command would create


@dataclass(frozen=True)
class Call:
    """One operation at one door: who asks, on what, with which inputs over the defaults."""

    actor: Actor
    ctx: Ctx
    args: Mapping[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return NAME_OF[self.actor]

    def hostile(self, arg: str) -> Hostile | None:
        found = self.args.get(arg)
        return found if isinstance(found, Hostile) else None

    def epoch(self) -> Hostile | int | None:
        """The epoch the call carries: the scenario's, else the one w1 was given."""
        given = self.hostile("epoch")
        if given is not None:
            return given
        return self.ctx.epoch if self.actor is Actor.WORKER else None

    def text(self, arg: str, default: str) -> str:
        found = self.args.get(arg, default)
        return found.text if isinstance(found, Hostile) else str(found)
