"""The worker's tools: start or find a run (for yourself or for a worker you name), say
where it is, keep it current, submit the result, take the lease (claim) or a silent run
over with its brief (resume) (its durable outputs and proof: `waypost.mcp.outputs`).
Each calls the same use case as the CLI verb of the same job (`waypost.usecases.runs`); the rules
are theirs alone."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from waypost import model
from waypost.core.access import Operation
from waypost.core.targets import FORMS
from waypost.durations import utcnow
from waypost.mcp import outputs
from waypost.mcp.answers import add_tools, answer, then_call
from waypost.mcp.session import Session
from waypost.mcp.shapes import (
    TEXT_CEILING,
    ActorName,
    Blocked,
    BlockerKindName,
    Claimed,
    KindName,
    Moved,
    Resumed,
    RunId,
    Started,
    Status,
    Unblocked,
)
from waypost.model import TERMINAL, Packet, State
from waypost.usecases import starting

Duration = Annotated[str | None, Field(max_length=64, description="A duration: 90s, 30m, "
                                       "4h, 2d (a bare number is seconds).")]


def register(server: MCPServer, session: Session) -> None:
    add_tools(server, (_start(session), _status(session), _heartbeat(session),
                       _block(session), _unblock(session), *outputs.tools(session),
                       _ready(session), _claim(session), _resume(session)))


def observed(store: Any, packet: Packet) -> dict[str, Any]:
    from waypost.mcp.answers import as_json
    from waypost.usecases.views import observe_run

    return as_json(observe_run(store, packet))


def _start(session: Session) -> Any:
    def checkpoint_start(
        title: Annotated[str, Field(max_length=TEXT_CEILING,
                                    description="What the work is, in one line.")],
        target: Annotated[str | None, Field(max_length=2_000, description=(
            f"Where the final result goes once approved: {FORMS} (none: tells nobody). "
            "Required for long_running work."))] = None,
        owner: Annotated[str | None, Field(max_length=200, description=(
            "Who reviews and approves [default: this server's actor]."))] = None,
        notify: Annotated[str | None, Field(max_length=2_000, description=(
            "Where non-final notices (blocked, ready, silent) go."))] = None,
        kind: Annotated[KindName | None, Field(description=(
            "bounded (finishes in this session) or long_running [default: from "
            "expect]."))] = None,
        expect: Duration = None,
        deadline: Annotated[str | None, Field(max_length=64, description=(
            "When the work must stop: +4h, or an ISO 8601 time."))] = None,
        heartbeat_interval: Duration = None,
        max_silence: Duration = None,
        review_within: Duration = None,
        gates: Annotated[list[str], Field(max_length=50, description=(
            "Checks the owner re-runs before approving, NAME=KIND:ARG, e.g. "
            "\"tests=command:pytest -q\", \"draft=artifact:draft.md\"."))] = [],  # noqa: B006
        idempotency_key: Annotated[str | None, Field(max_length=200, description=(
            "The same key with the same parameters returns the same run (safe to retry)."
        ))] = None,
        host_session: Annotated[str | None, Field(max_length=200, description=(
            "Your agent host's session id, so its stop hook finds this run [default: the "
            "session this server was started in, when the host says so]."))] = None,
        worker: Annotated[ActorName | None, Field(description=(
            "Who does the work: that actor holds the lease from the start (epoch 1) and "
            "takes it up with claim, through its own server [default: you]."))] = None,
    ) -> Annotated[CallToolResult, Started]:
        """Record a checkpoint packet BEFORE starting work that takes a while, so where the
        work stands survives this session. Call it once per piece of work (pass an
        idempotency_key to make retries safe). You become the run's worker (you hold its
        lease), unless you name another worker: then that worker holds it and you hand the
        run over (it calls claim). The owner (default: you) reviews and approves. Returns
        the run id, its packet and the epoch you hold (none when you named another
        worker). Next: heartbeat while you work, add_artifact and run_evidence as you go,
        then mark_ready; or, having named a worker, tell it the run id."""

        def work() -> dict[str, Any]:
            spec = starting.start_spec(
                title, owner=owner, target=target, notify=notify, kind=kind, expect=expect,
                deadline=deadline, heartbeat_interval=heartbeat_interval,
                max_silence=max_silence, review_within=review_within, gates=gates,
                worker=worker or session.actor, idempotency_key=idempotency_key,
                session=host_session or session.host_session, config=session.config)
            session.permit(owner=owner or session.actor)
            session.exposure.check_start(target=spec.target, notify=spec.notify,
                                         gates=spec.gates)
            with session.store(create=True) as store:
                run, created = starting.start(store, spec, actor=session.actor,
                                              config=session.config)
                packet = run.packet
                if packet.worker is not None and packet.worker.actor == session.actor:
                    run.epoch = packet.worker.epoch
                    session.hold(run)
                handed = packet.worker is not None and packet.worker.actor != session.actor
                return {"run": run.id, "created": created, "state": packet.state,
                        "epoch": run.epoch, "packet": observed(store, packet),
                        "next": f"{packet.worker.actor} calls claim on {run.id}, through "
                        "its own server" if handed and packet.worker else
                        "heartbeat while you work; add_artifact, run_evidence; "
                        "then mark_ready"}

        return answer("checkpoint_start", work)

    return checkpoint_start


def _status(session: Session) -> Any:
    def checkpoint_status(
        run: Annotated[str | None, Field(max_length=64, description=(
            "One run's id; leave it out for every active run you work on or own."))] = None,
    ) -> Annotated[CallToolResult, Status]:
        """Where work stands: one run's packet (state, liveness, blockers, artifacts,
        evidence, gates), or, without a run id, every active run this server's actor works
        on or owns. Read-only. Call it at the start of a session to find work in progress,
        and whenever a refusal names it. Next: claim a run you were named the worker of,
        resume one someone else left silent, or continue yours with heartbeat."""

        def work() -> dict[str, Any]:
            from waypost.mcp.answers import as_json
            from waypost.usecases import reading

            with session.store() as store:
                if run is not None:
                    packets = [store.get(run)]
                    session.permit(packet=packets[0])
                else:
                    session.permit(Operation.LIST)
                    active = [s for s in State if s not in TERMINAL]
                    packets = [p for p in session.visible(store.list_runs(states=active,
                                                                          limit=500))
                               if p.owner == session.actor
                               or (p.worker is not None and p.worker.actor == session.actor)]
                seen = reading.runs(store, session.grant, packets, config=session.config,
                                    now=utcnow())
                said = {"runs": as_json(seen),
                        "next": "heartbeat on a run you hold; claim one you were named the "
                        "worker of; resume one left silent"}
                return said | (then_call(packets[0], session.actor) if run is not None
                               else {})

        return answer("checkpoint_status", work)

    return checkpoint_status


def _heartbeat(session: Session) -> Any:
    def heartbeat(
        run: RunId,
        note: Annotated[str | None, Field(max_length=TEXT_CEILING, description=(
            "What you are doing now, in one line."))] = None,
        progress: Annotated[float | None, Field(ge=0.0, le=1.0, description=(
            "Fraction done, 0 to 1."))] = None,
    ) -> Annotated[CallToolResult, Moved]:
        """Say you are alive and still working on the run, optionally what you are doing and
        how far along. Call it every few minutes while you work (past the run's
        max_silence the watchdog marks you silent and another worker may take over).
        Returns the run's state and version. Next: keep working; block if stuck."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).heartbeat(note=note, progress=progress)
            return {"run": run, "state": packet.state, "version": packet.version,
                    "next": "keep working; heartbeat again within the interval"}

        return answer("heartbeat", work)

    return heartbeat


def _block(session: Session) -> Any:
    def block(
        run: RunId,
        kind: Annotated[BlockerKindName, Field(description=(
            "missing_input / permission_boundary (the owner resolves these), "
            "failed_command / unavailable_resource / other (you resolve these)."))],
        detail: Annotated[str, Field(min_length=1, max_length=TEXT_CEILING, description=(
            "Specific: what is missing or failing, never just \"waiting\"."))],
    ) -> Annotated[CallToolResult, Blocked]:
        """Record that the work cannot proceed, and exactly why: the run becomes blocked and
        the owner can see it. Call it instead of waiting silently or guessing. Returns the
        blocker id. Next: unblock RUN BLOCKER with the resolution once it is resolved."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet, blocker = session.run(store, run).block(model.BlockerKind(kind), detail)
            return {"run": run, "blocker": blocker, "state": packet.state,
                    "next": f"unblock {blocker} once it is resolved"}

        return answer("block", work)

    return block


def _unblock(session: Session) -> Any:
    def unblock(
        run: RunId,
        blocker: Annotated[str, Field(min_length=1, max_length=64, description=(
            "The blocker id from block (or checkpoint_status)."))],
        resolution: Annotated[str, Field(min_length=1, max_length=TEXT_CEILING, description=(
            "How it was resolved."))],
    ) -> Annotated[CallToolResult, Unblocked]:
        """Resolve a blocker with how it was resolved; resolving the last open one returns
        the run to where it was (usually in_progress). Returns the state and any blockers
        still open. Next: continue the work (heartbeat)."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run, blocker=blocker).unblock(blocker,
                                                                       resolution)
            return then_call(packet, session.actor) | {"run": run, "state": packet.state,
                    "open_blockers": [b.id for b in packet.open_blockers],
                    "next": "heartbeat and continue the work"}

        return answer("unblock", work)

    return unblock


def _ready(session: Session) -> Any:
    def mark_ready(
        run: RunId,
        summary: Annotated[str, Field(min_length=1, max_length=TEXT_CEILING, description=(
            "What was done (private to the owner)."))],
        public_summary: Annotated[str | None, Field(max_length=TEXT_CEILING, description=(
            "Safe to show anyone."))] = None,
        artifacts: Annotated[list[Annotated[str, Field(max_length=255)]], Field(
            max_length=100, description=(
                "Names of recorded artifacts the result consists of; each must hold "
                "substantive content."))] = [],  # noqa: B006
    ) -> Annotated[CallToolResult, Moved]:
        """Submit the result for the owner's review: the run becomes ready_for_review.
        Refused while a blocker is open, with no evidence at all, or when a named artifact
        is missing or empty; the refusal says which. Returns the new state. Next: the
        owner reviews; you wait (or, as owner, call review)."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).ready(summary, public_summary, artifacts,
                                                       config=session.config)
            return {"run": run, "state": packet.state, "version": packet.version,
                    "next": "the owner reviews it (review, then approve or request_changes)",
                    **then_call(packet, packet.owner)}

        return answer("mark_ready", work)

    return mark_ready


def _claim(session: Session) -> Any:
    def claim(run: RunId) -> Annotated[CallToolResult, Claimed]:
        """Take the run's worker lease: its epoch goes up by one, so whoever held it
        before (another worker, or an older process of yours) is fenced, and this server
        holds the new epoch for your writes. Call it when you were named the run's worker
        (checkpoint_start's worker) or the owner handed you the takeover (transfer). A live
        lease of another worker is only the owner's, or its nominee's, to take; a run
        blocked as worker_silent is taken over as resume takes it. Answers no brief (resume
        does). Returns the epoch. Next: heartbeat while you work."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                handle = session.run(store, run)
                packet = handle.claim()
                session.hold(handle)
            return {"run": run, "state": packet.state, "version": packet.version,
                    "epoch": handle.epoch,
                    "next": "heartbeat while you work; add_artifact, run_evidence; "
                    "then mark_ready", **then_call(packet, session.actor)}

        return answer("claim", work)

    return claim


def _resume(session: Session) -> Any:
    def resume(run: RunId) -> Annotated[CallToolResult, Resumed]:
        """Take over a run whose worker went silent (or that you worked on in an earlier
        session): you get the lease (the old worker's writes are refused from now on) and
        the handoff brief: what the run is, what happened, open blockers, artifacts to
        fetch, gates still to pass, next steps. Call it at the start of a session that
        continues someone's work. Next: follow the brief's next steps."""

        def work() -> dict[str, Any]:
            from waypost.mcp.answers import as_json
            from waypost.usecases import handoff

            with session.store() as store:
                handle = session.run(store, run)
                found = handle.resume()
                session.hold(handle)
            return {"run": run, "epoch": found.epoch, "brief": as_json(found),
                    "text": handoff.brief_text(found, utcnow()),
                    "next": "follow the brief's next steps; heartbeat as you go"}

        return answer("resume", work)

    return resume
