"""The CLI's words for a refusal: the hint with each next step as the command line to type
(`waypost.usecases.commands`), and the `--json` error document. Loaded only when an error is
reported."""

from __future__ import annotations

from typing import Any

from waypost.errors import Step, WaypostError
from waypost.usecases.commands import command

__all__ = ["command", "document", "hint"]


def hint(exc: WaypostError) -> str:
    """The error's hint, its steps as commands."""
    return exc.hint_with(command)


def document(exc: WaypostError) -> dict[str, Any]:
    """The `--json` error document's body: code, message, hint (as before), and the first
    step as data (`next`, with its `command`), any others in `also`."""
    body: dict[str, Any] = {"code": exc.code, "message": exc.message, "hint": hint(exc)}
    shown = [_step(s) for s in exc.steps]
    if shown:
        body["next"] = shown[0]
    if shown[1:]:
        body["also"] = shown[1:]
    return body


def _step(step: Step) -> dict[str, Any]:
    return {"verb": step.verb, "run": step.run, "args": dict(step.args),
            "fill": list(step.fill), "actor": step.actor, "command": command(step)}
