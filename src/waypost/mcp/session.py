"""What every tool shares: who acts, on which store, within which limits.

Over stdio the acting party is the server's (`--as`, `WAYPOST_ACTOR`), never a tool
argument. Over HTTP it is the holder of the bearer token each request carries (read per
request, so a revoked token stops at once), and the token's role caps what that holder may
ask for (`waypost.core.access`), on top of the rules every actor is under. Either way a
tool acts with the lease epoch this server holds for that actor on each run it started or
resumed (so after another worker takes a run over, this server's writes to it are refused
as the CLI's would be). The store is opened for each call (tools run in worker threads)
and closed after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from waypost.config import Config
from waypost.core import access
from waypost.core.access import Operation
from waypost.core.exposure import LOCAL, Exposure
from waypost.errors import Unauthenticated
from waypost.model import Grant, Packet
from waypost.store import Store, open_store
from waypost.usecases.runs import Run

DEFAULT_EVIDENCE_LIMIT = 20.0  # seconds: MCP hosts time a tool call out around 60 s

# what each tool asks for, in the token roles' terms
OPERATION_OF_TOOL: dict[str, Operation] = {
    "checkpoint_start": Operation.START, "checkpoint_status": Operation.READ,
    "heartbeat": Operation.HEARTBEAT, "block": Operation.BLOCK,
    "unblock": Operation.UNBLOCK, "add_artifact": Operation.ARTIFACT,
    "run_evidence": Operation.EVIDENCE, "check_evidence": Operation.EVIDENCE,
    "skip_evidence": Operation.EVIDENCE, "mark_ready": Operation.READY,
    "claim": Operation.CLAIM, "resume": Operation.RESUME, "transfer": Operation.TRANSFER,
    "review": Operation.REVIEW, "approve": Operation.APPROVE,
    "request_changes": Operation.CHANGES, "cancel": Operation.CANCEL,
    "retarget": Operation.RETARGET, "add_gate": Operation.ADD_GATE,
    "adopt_gate": Operation.ADOPT_GATE, "checkpoint_wait": Operation.READ,
    "inbox": Operation.LIST,
}


@dataclass(frozen=True)
class Call:
    """The request being served: its token's grant (None over stdio) and what it asked
    for (a tool's name, or `read` for a resource)."""

    grant: Grant | None
    operation: Operation


CALL: ContextVar[Call | None] = ContextVar("waypost_mcp_call", default=None)


@dataclass
class Session:
    """What every tool shares: who acts, on which store, within which limits."""

    store_url: str | None
    server_actor: str  # every tool's actor over stdio
    config: Config
    evidence_limit: float = DEFAULT_EVIDENCE_LIMIT
    # the agent host's session (Claude Code passes CLAUDE_CODE_SESSION_ID to a stdio server,
    # read once at start: the variable is inherited), recorded on the runs this server starts
    # so that the host's hooks find the session's run
    host_session: str | None = None
    # what the callers may make this server run, read or reach: LOCAL over stdio, the
    # --allow-exec / --allow-host policy over HTTP (`waypost.core.exposure`)
    exposure: Exposure = LOCAL
    epochs: dict[tuple[str, str], int] = field(default_factory=dict)  # (actor, run) → epoch
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _waits: list[Store] = field(default_factory=list)  # the one store every wait follows

    @property
    def actor(self) -> str:
        """Who this call acts as: the token's holder over HTTP, else the server's actor."""
        grant = self.grant
        return grant.holder if grant is not None else self.server_actor

    @property
    def grant(self) -> Grant | None:
        call = CALL.get()
        return call.grant if call is not None else None

    @contextmanager
    def store(self, *, create: bool = False) -> Iterator[Store]:
        store = open_store(self.store_url, create=create)
        try:
            yield store
        finally:
            store.close()

    def waiting_store(self) -> Store:
        """The store the waits follow, opened once and kept for the server's life: every
        waiting call shares its one follower of the change cursor (`usecases.waiting`)."""
        with self._lock:
            if not self._waits:
                self._waits.append(open_store(self.store_url, create=False))
            return self._waits[0]

    def permit(self, operation: Operation | None = None, packet: Packet | None = None, *,
               owner: str | None = None, blocker: str | None = None) -> None:
        """Over HTTP, refuse what the caller's token does not allow (NotAuthorized); over
        stdio the server's actor is trusted, as the CLI's --as is."""
        if not self.remote:
            return
        call = CALL.get()
        if call is None or call.grant is None:
            raise Unauthenticated("no token came with this call",
                                  hint="send Authorization: Bearer wpt_…")
        access.check_operation(call.grant, operation or call.operation, packet, owner=owner,
                               blocker=blocker)

    def visible(self, packets: list[Packet]) -> list[Packet]:
        grant = self.grant
        return packets if grant is None else access.visible(grant, packets)

    @property
    def remote(self) -> bool:
        """Whether this server faces the network (MCP over HTTP: tokens, the policy)."""
        return self.exposure.remote

    def run(self, store: Store, run_id: str, *, blocker: str | None = None) -> Run:
        """The run, as this call's actor with the epoch held here, once the caller's token
        allows what this call asks of it."""
        if self.remote:
            self.permit(packet=store.get(run_id), blocker=blocker)
        actor = self.actor
        with self._lock:
            epoch = self.epochs.get((actor, run_id))
        return Run(store, run_id, actor=actor, epoch=epoch)

    def hold(self, run: Run) -> None:
        """Remember the epoch `run` holds now (after start, claim or resume)."""
        if run.epoch is not None:
            with self._lock:
                self.epochs[(run.actor, run.id)] = run.epoch
