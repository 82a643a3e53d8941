"""The gate tools: add_gate (the owner, or the worker before mark_ready) and adopt_gate
(the owner). Each calls the `Run` verb the CLI's `waypost gate add|adopt` calls; who may
is the rules' (`core.authority`, and a token's role over HTTP)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from waypost.core.gates import runs_at_review
from waypost.mcp.answers import add_tools, answer, as_json
from waypost.mcp.session import Session
from waypost.mcp.shapes import GateMoved, RunId
from waypost.model import Packet

GateName = Annotated[str, Field(min_length=1, max_length=200, description=(
    "The gate's name, e.g. tests."))]


def register(server: MCPServer, session: Session) -> None:
    add_tools(server, (_add_gate(session), _adopt_gate(session)))


def _gate(packet: Packet, name: str) -> dict[str, Any]:
    gate = next(g for g in packet.gates if g.name == name)
    return {**as_json(gate), "runs_at_review": runs_at_review(packet, gate)}


def _add_gate(session: Session) -> Any:
    def add_gate(
        run: RunId,
        name: GateName,
        check: Annotated[str, Field(min_length=1, max_length=2_000, description=(
            "KIND:ARG, e.g. \"command:pytest -q\", \"artifact:report.md\"."))],
        required: Annotated[bool, Field(description=(
            "Whether approval needs it to pass (or a waiver)."))] = True,
    ) -> Annotated[CallToolResult, GateMoved]:
        """Declare another gate the result must pass before delivery. As the owner, it is
        yours: review runs it. As the worker (before mark_ready) it is recorded as yours:
        the owner sees it, and review runs a command, URL or file check of yours only once
        the owner adopts it. Returns the gate and whether review runs it. Next: keep
        working; the owner reviews (and adopts)."""

        def work() -> dict[str, Any]:
            from waypost.core import access

            with session.store() as store:
                handle = session.run(store, run)
                if session.remote is not None:
                    access.check_remote_gates([check], outbound=session.remote.outbound)
                packet = handle.add_gate(name, check, required=required)
            return {"run": run, "state": packet.state, "gate": _gate(packet, name),
                    "next": "the owner adopts it (adopt_gate) if review is to run it"}

        return answer("add_gate", work)

    return add_gate


def _adopt_gate(session: Session) -> Any:
    def adopt_gate(run: RunId, name: GateName) -> Annotated[CallToolResult, GateMoved]:
        """Owner: make a gate someone else declared your own, so review runs it here, in
        your environment (read its check first: a command runs as you). Returns the gate.
        Next: review."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).adopt_gate(name)
            return {"run": run, "state": packet.state, "gate": _gate(packet, name),
                    "next": "review runs it now"}

        return answer("adopt_gate", work)

    return adopt_gate
