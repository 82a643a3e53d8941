"""The CLI's words for a next step (`waypost.errors.Step`): the command line to type,
`waypost VERB RUN ARG --option value --as ACTOR`, every value quoted for a POSIX shell and
every value still to be given as its placeholder (TEXT, URI, PATH, …). Loaded only when an
error is reported."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any, Final

from waypost.errors import Step, WaypostError

# the CLI's own name for a shared verb, where it differs
WORDS: Final = {"read": "show", "list": "ls", "artifact": "artifact add",
                "deliver": "deliver --once"}
# arguments written in place (after the run), not as --options
POSITIONAL: Final = {"unblock": ("blocker",), "retarget": ("target",),
                     "artifact": ("content",), "evidence": ("check",)}
PLACEHOLDERS: Final = {"content": "PATH", "target": "URI", "notify": "URI", "to": "ACTOR",
                       "name": "NAME", "blocker": "BLOCKER", "kind": "KIND",
                       "authority": "AUTHORITY", "check": "CHECK", "gate": "GATE",
                       "reason": "TEXT", "command": "CMD"}


EVIDENCE: Final = {"check": "evidence check", "skip": "evidence skip",
                   "command": "evidence run"}


def verb_words(step: Step) -> str:
    """The CLI's words for the step's verb (`evidence run`, `check` or `skip` by its form)."""
    return EVIDENCE[step.form] if step.form else WORDS.get(step.verb, step.verb)


def command(step: Step) -> str:
    """The command line that takes `step`."""
    words = ["waypost", *verb_words(step).split()]
    if step.run is not None:
        words.append(shlex.quote(step.run))
    words += _arguments(step)
    if step.actor is not None:
        words += ["--as", shlex.quote(step.actor)]
    if "command" in step.args or "command" in step.fill:
        words += ["--", _value(step, "command", raw=True)]
    return " ".join(words)


def _arguments(step: Step) -> Iterator[str]:
    first = POSITIONAL.get(step.verb, ())
    named = [n for n in (*step.args, *step.fill) if n != "command"]
    if step.verb == "approve" and "gate" in named:  # a waiver: --waive GATE=REASON
        gate = step.args.get("gate", "GATE")
        yield f"--waive {shlex.quote(gate + '=' + step.args.get('reason', 'REASON'))}"
        named = [n for n in named if n not in ("gate", "reason")]
    for name in [n for n in first if n in named]:
        yield _value(step, name)
    for name in dict.fromkeys(n for n in named if n not in first):
        yield f"--{name.replace('_', '-')} {_value(step, name)}"


def _value(step: Step, name: str, *, raw: bool = False) -> str:
    if name in step.args:
        return step.args[name] if raw else shlex.quote(step.args[name])
    return PLACEHOLDERS.get(name, "TEXT")


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
