"""The CLI's words for a refusal: the hint with each next step as the command line to type
(`waypost.usecases.commands`), and the `--json` error document. Loaded only when an error is
reported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from waypost.errors import StaleLease, Step, WaypostError
from waypost.usecases.commands import command, for_caller

__all__ = ["command", "document", "hint"]


def hint(exc: WaypostError) -> str:
    """The error's hint, its steps as commands, written for the caller who was refused
    (`usecases.commands.for_caller`) when it named itself."""
    return exc.hint_with(_for(exc))


def _for(exc: WaypostError) -> Callable[[Step], str]:
    from waypost.cli.context import CALLER

    caller = CALLER.get()
    if caller is None:
        return command
    fenced = isinstance(exc, StaleLease)
    return lambda s: for_caller(s, caller.actor, caller.run, caller.epoch, fenced=fenced)


def document(exc: WaypostError) -> dict[str, Any]:
    """The `--json` error document's body: code, message, hint (as before), and the first
    step as data (`next`, with its `command`), any others in `also`."""
    body: dict[str, Any] = {"code": exc.code, "message": exc.message, "hint": hint(exc)}
    said = _for(exc)
    shown = [_step(s, said) for s in exc.steps]
    if shown:
        body["next"] = shown[0]
    if shown[1:]:
        body["also"] = shown[1:]
    return body


def _step(step: Step, said: Callable[[Step], str]) -> dict[str, Any]:
    return {"verb": step.verb, "run": step.run, "args": dict(step.args),
            "fill": list(step.fill), "actor": step.actor, "command": said(step)}
