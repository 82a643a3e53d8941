"""The worker's tools: start or find a run, say where it is, keep it current, record its
durable outputs and proof, submit the result, take a silent run over. Each calls the same
use case as the CLI verb of the same job (`waypost.runs`); the rules are theirs alone."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from waypost import model, runs
from waypost.durations import parse_deadline, parse_duration, utcnow
from waypost.errors import InvalidInput
from waypost.mcp.answers import add_tools, answer
from waypost.mcp.session import Session
from waypost.mcp.shapes import (
    TEXT_CEILING,
    ArtifactAdded,
    ArtifactRoleName,
    Blocked,
    BlockerKindName,
    EvidenceAdded,
    EvidenceKindName,
    KindName,
    Moved,
    Resumed,
    RunId,
    SkippedKindName,
    Started,
    Status,
    Unblocked,
)
from waypost.model import TERMINAL, Packet, State

Duration = Annotated[str | None, Field(max_length=32, description="A duration: 90s, 30m, "
                                       "4h, 2d (a bare number is seconds).")]


def register(server: MCPServer, session: Session) -> None:
    add_tools(server, (_start(session), _status(session), _heartbeat(session),
                       _block(session), _unblock(session), _add_artifact(session),
                       _run_evidence(session), _check_evidence(session),
                       _skip_evidence(session), _ready(session), _resume(session)))


def observed(store: Any, packet: Packet) -> dict[str, Any]:
    from waypost.mcp.answers import as_json
    from waypost.views import observe_run

    return as_json(observe_run(store, packet))


def _start(session: Session) -> Any:
    def checkpoint_start(
        title: Annotated[str, Field(min_length=1, max_length=TEXT_CEILING,
                                    description="What the work is, in one line.")],
        target: Annotated[str | None, Field(max_length=2_000, description=(
            "Where the final result goes once approved: file:PATH, https://…, exec:CMD, "
            "slack:…, github:OWNER/REPO#N, mailto:…, or none: (nobody is told). Required "
            "for long_running work."))] = None,
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
        gates: Annotated[list[str], Field(max_length=50, description=(
            "Checks the owner re-runs before approving, NAME=KIND:ARG, e.g. "
            "\"tests=command:pytest -q\", \"draft=artifact:draft.md\"."))] = [],  # noqa: B006
        idempotency_key: Annotated[str | None, Field(max_length=200, description=(
            "The same key with the same parameters returns the same run (safe to retry)."
        ))] = None,
    ) -> Annotated[CallToolResult, Started]:
        """Record a checkpoint packet BEFORE starting work that takes a while, so where the
        work stands survives this session. Call it once per piece of work (pass an
        idempotency_key to make retries safe). You become the run's worker (you hold its
        lease); the owner (default: you) reviews and approves. Returns the run id and its
        packet. Next: heartbeat while you work, add_artifact and run_evidence as you go,
        then mark_ready."""

        def work() -> dict[str, Any]:
            durations = {name: None if value is None else parse_duration(value, name, positive=True)
                         for name, value in (("expect", expect),
                                             ("heartbeat_interval", heartbeat_interval),
                                             ("max_silence", max_silence))}
            if deadline is not None:
                parse_deadline(deadline, utcnow(), "deadline")
            with session.store(create=True) as store:
                run, created = runs.start(
                    store, title, actor=session.actor, owner=owner, target=target,
                    notify=notify, kind=model.Kind(kind) if kind else None,
                    deadline=deadline, gates=[runs.parse_gate(g) for g in gates],
                    worker=session.actor, idempotency_key=idempotency_key,
                    config=session.config, expect=durations["expect"],
                    heartbeat_interval=durations["heartbeat_interval"],
                    max_silence=durations["max_silence"])
                packet = run.packet
                if packet.worker is not None and packet.worker.actor == session.actor:
                    run.epoch = packet.worker.epoch
                    session.hold(run)
                return {"run": run.id, "created": created, "state": packet.state,
                        "epoch": run.epoch, "packet": observed(store, packet),
                        "next": "heartbeat while you work; add_artifact, run_evidence; "
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
        and whenever a refusal names it. Next: resume a run someone else left silent, or
        continue yours with heartbeat."""

        def work() -> dict[str, Any]:
            from waypost.mcp.answers import as_json
            from waypost.views import observe_runs

            with session.store() as store:
                if run is not None:
                    packets = [store.get(run)]
                else:
                    active = [s for s in State if s not in TERMINAL]
                    packets = [p for p in store.list_runs(states=active, limit=500)
                               if p.owner == session.actor
                               or (p.worker is not None and p.worker.actor == session.actor)]
                return {"runs": as_json(observe_runs(store, packets, utcnow())),
                        "next": "heartbeat on a run you hold, or resume one left silent"}

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
                packet = session.run(store, run).unblock(blocker, resolution)
            return {"run": run, "state": packet.state,
                    "open_blockers": [b.id for b in packet.open_blockers],
                    "next": "heartbeat and continue the work"}

        return answer("unblock", work)

    return unblock


def _add_artifact(session: Session) -> Any:
    def add_artifact(
        run: RunId,
        name: Annotated[str, Field(min_length=1, max_length=255, description=(
            "The artifact's name in the packet, e.g. report.md."))],
        role: Annotated[ArtifactRoleName, Field(description=(
            "draft, report, result (the deliverable), log, review or other."))] = "other",
        content: Annotated[str | None, Field(description=(
            "The artifact's text, inline. Give this or path."))] = None,
        path: Annotated[str | None, Field(max_length=4_096, description=(
            "A file on the machine this server runs on, or an http(s) URL to reference. "
            "Give this or content."))] = None,
    ) -> Annotated[CallToolResult, ArtifactAdded]:
        """Record a durable output of the work (a report, a draft, the result): its bytes
        are copied into the store, so they survive this session and the owner can fetch
        them. Give the text inline (content) or a path on the server's machine. Returns the
        record (size, sha256). Next: mark_ready names it in its artifacts."""

        def work() -> dict[str, Any]:
            if (content is None) == (path is None):
                raise InvalidInput("give the artifact's content or its path, not both or "
                                   "neither", hint="add_artifact RUN NAME content=TEXT")
            limit = session.config.max_artifact_bytes
            with session.store() as store:
                handle = session.run(store, run)
                if path is not None:
                    packet = handle.add_artifact(path, role=model.ArtifactRole(role),
                                                 name=name, max_bytes=limit)
                else:
                    packet = _add_inline(handle, name, role, content or "", limit)
            return {"run": run, "artifact": _plain(packet.artifacts[-1]),
                    "next": "name it in mark_ready's artifacts"}

        return answer("add_artifact", work)

    return add_artifact


def _add_inline(handle: runs.Run, name: str, role: str, content: str, limit: int) -> Packet:
    """Inline text recorded as the CLI records a file: written to a private temporary file
    (never under the caller's name) and added from there, within the size limit."""
    data = content.encode("utf-8", errors="strict")
    if len(data) > limit:
        raise InvalidInput(f"artifact {name!r} is {len(data)} bytes, over the limit of "
                           f"{limit}", hint="store a smaller artifact, or raise "
                           "[limits] max_artifact_bytes")
    with tempfile.TemporaryDirectory(prefix="waypost-mcp-") as folder:
        file = Path(folder) / "content"
        file.write_bytes(data)
        return handle.add_artifact(str(file), role=model.ArtifactRole(role), name=name,
                                   max_bytes=limit)


def _plain(record: Any) -> dict[str, Any]:
    from waypost.mcp.answers import as_json

    return as_json(record)


def _run_evidence(session: Session) -> Any:
    def run_evidence(
        run: RunId,
        command: Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(
            min_length=1, max_length=1_000, description=(
                "The command as an argument list, e.g. [\"pytest\", \"-q\"] (no shell)."))],
        kind: Annotated[EvidenceKindName, Field(description=(
            "What the command checks: test, build, lint, grep, inspect, live_check or "
            "command."))] = "command",
        timeout: Annotated[float | None, Field(gt=0, description=(
            "Seconds before the command is killed and recorded as failed; at most this "
            "server's limit (default 20)."))] = None,
    ) -> Annotated[CallToolResult, EvidenceAdded]:
        """Run a command now (tests, a build, a linter) and record what actually happened
        as evidence: exit code, duration, output tail, full log. This is proof, not a
        claim. Only short commands (the server's limit, 20 s by default): for longer ones,
        run `waypost evidence run RUN -- CMD` in your shell. Returns the evidence
        (verdict passed only for exit code 0). Next: fix and re-run on failure; else
        mark_ready."""

        def work() -> dict[str, Any]:
            limit = session.evidence_limit
            wanted = limit if timeout is None else timeout
            if wanted > limit:
                raise InvalidInput(
                    f"a timeout of {wanted:g}s is over this server's limit of {limit:g}s "
                    "(a tool call must answer well within the host's time limit)",
                    hint=f"run it in your shell: waypost evidence run {shlex.quote(run)} -- "
                    f"{shlex.join(command)}")
            with session.store() as store:
                packet = session.run(store, run).record_command(
                    command, kind=model.EvidenceKind(kind), timeout=wanted,
                    tail_bytes=session.config.output_tail_bytes,
                    max_output=session.config.max_output_bytes)
            return {"run": run, "evidence": _plain(packet.evidence[-1]),
                    "next": "mark_ready when the evidence shows the work is done"}

        return answer("run_evidence", work)

    return run_evidence


def _check_evidence(session: Session) -> Any:
    def check_evidence(
        run: RunId,
        check: Annotated[str, Field(min_length=1, max_length=4_096, description=(
            "KIND:ARG: artifact:NAME (stored, intact, substantive), grep:PATTERN:PATH, "
            "grep!:PATTERN:PATH (absent), no-private (nothing private in the artifacts and "
            "public summary), http:URL [TEXT], command:CMD."))],
    ) -> Annotated[CallToolResult, EvidenceAdded]:
        """Run one of waypost's built-in checks now and record what it found as evidence
        (assurance recorded). Use it to prove an artifact is substantive, a pattern is
        present or absent, nothing private leaks, or a URL answers. Returns the evidence.
        Next: mark_ready, or fix what failed."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).check(check, config=session.config)
            return {"run": run, "evidence": _plain(packet.evidence[-1]),
                    "next": "mark_ready when the evidence shows the work is done"}

        return answer("check_evidence", work)

    return check_evidence


def _skip_evidence(session: Session) -> Any:
    def skip_evidence(
        run: RunId,
        kind: Annotated[SkippedKindName, Field(description="The kind of check not run.")],
        reason: Annotated[str, Field(min_length=1, max_length=TEXT_CEILING, description=(
            "Named, e.g. \"credential STAGING_KEY unavailable\"."))],
    ) -> Annotated[CallToolResult, EvidenceAdded]:
        """Record a check that could not run, and the named reason (a named gap beats fake
        confidence; the owner sees it as skipped). Returns the evidence. Next: mark_ready
        or run_evidence for what can run."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).skip_evidence(model.EvidenceKind(kind),
                                                               reason)
            return {"run": run, "evidence": _plain(packet.evidence[-1]),
                    "next": "mark_ready, or run_evidence for what can run"}

        return answer("skip_evidence", work)

    return skip_evidence


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
                    "next": "the owner reviews it (review, then approve or request_changes)"}

        return answer("mark_ready", work)

    return mark_ready


def _resume(session: Session) -> Any:
    def resume(run: RunId) -> Annotated[CallToolResult, Resumed]:
        """Take over a run whose worker went silent (or that you worked on in an earlier
        session): you get the lease (the old worker's writes are refused from now on) and
        the handoff brief: what the run is, what happened, open blockers, artifacts to
        fetch, gates still to pass, next steps. Call it at the start of a session that
        continues someone's work. Next: follow the brief's next steps."""

        def work() -> dict[str, Any]:
            from waypost import handoff
            from waypost.mcp.answers import as_json

            with session.store() as store:
                handle = session.run(store, run)
                found = handle.resume()
                session.hold(handle)
            return {"run": run, "epoch": found.epoch, "brief": as_json(found),
                    "text": handoff.brief_text(found, utcnow()),
                    "next": "follow the brief's next steps; heartbeat as you go"}

        return answer("resume", work)

    return resume
