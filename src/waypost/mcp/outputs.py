"""The worker's durable outputs and proof: add_artifact, run_evidence, check_evidence,
skip_evidence. Each calls the use case of the CLI verb of the same job (`waypost.usecases.runs`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from mcp.types import CallToolResult
from pydantic import Field

from waypost import inputs, model
from waypost.errors import InvalidInput
from waypost.mcp.answers import answer, as_json, then_call
from waypost.mcp.session import Session
from waypost.mcp.shapes import (
    TEXT_CEILING,
    ArtifactAdded,
    ArtifactRoleName,
    EvidenceAdded,
    EvidenceKindName,
    RunId,
    SkippedKindName,
)
from waypost.model import Packet
from waypost.usecases import runs


def tools(session: Session) -> tuple[Callable[..., CallToolResult], ...]:
    return (_add_artifact(session), _run_evidence(session), _check_evidence(session),
            _skip_evidence(session))


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
                    session.exposure.check_source(path, run=run, name=name)
                    packet = handle.add_artifact(path, role=model.ArtifactRole(role),
                                                 name=name, max_bytes=limit)
                else:
                    packet = _add_inline(handle, name, role, content or "", limit)
            return then_call(packet, session.actor) | {
                "run": run, "artifact": _plain(packet.artifacts[-1]),
                    "next": "name it in mark_ready's artifacts"}

        return answer("add_artifact", work)

    return add_artifact


def _add_inline(handle: runs.Run, name: str, role: str, content: str, limit: int) -> Packet:
    """Inline text recorded as bytes (`Run.add_artifact_bytes`: decided, then counted)."""
    inputs.utf8([content], "content")
    return handle.add_artifact_bytes(name, [content.encode("utf-8")],
                                     role=model.ArtifactRole(role), max_bytes=limit)


def _plain(record: Any) -> dict[str, Any]:
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
                handle = session.run(store, run)
                session.exposure.check_command(shlex.join(command))
                packet = handle.record_command(
                    command, kind=model.EvidenceKind(kind), timeout=wanted,
                    tail_bytes=session.config.output_tail_bytes,
                    max_output=session.config.max_output_bytes)
            return {"run": run, "evidence": _plain(packet.evidence[-1]),
                    "next": "mark_ready when the evidence shows the work is done",
                    **then_call(packet, session.actor)}

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
                handle = session.run(store, run)
                session.exposure.check_check(check, store.get(run))
                # a command: check answers within the tool's limit, as run_evidence does
                limit = min(session.config.evidence_timeout, session.evidence_limit)
                packet = handle.check(check, config=msgspec.structs.replace(
                    session.config, evidence_timeout=limit),
                    files=session.exposure.reads_files)
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
