"""A next step (`waypost.errors.Step`) as the command line a shell user types:
`waypost VERB RUN ARG --option value --as ACTOR`, every value quoted for a POSIX shell and
every value still to be given as its placeholder (TEXT, URI, PATH, …). The words of the
doors that speak to a shell: the CLI (`waypost.cli.steps`) and the agent-host hooks,
whose agents run `waypost` in theirs."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Final

from waypost.errors import FLAGS, Step

# the CLI's own name for a shared verb, where it differs
WORDS: Final = {"read": "show", "list": "ls", "artifact": "artifact add",
                "deliver": "deliver --once", "add_gate": "gate add", "adopt_gate": "gate adopt"}
# arguments written in place (after the run), not as --options
POSITIONAL: Final = {"unblock": ("blocker",), "retarget": ("target",),
                     "artifact": ("content",), "evidence": ("check",), "adopt_gate": ("name",)}
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
    if step.verb == "add_gate":  # a gate is written NAME=KIND:ARG, in place
        spec = step.args.get("name", "NAME") + "=" + step.args.get("check", "KIND:ARG")
        yield shlex.quote(spec)
        named = [n for n in named if n not in ("name", "check")]
    for name in [n for n in first if n in named]:
        yield _value(step, name)
    for name in dict.fromkeys(n for n in named if n not in first):
        if name in FLAGS:  # a switch: named when on, left out otherwise
            if step.args.get(name) == "true":
                yield f"--{name.replace('_', '-')}"
            continue
        yield f"--{name.replace('_', '-')} {_value(step, name)}"


def _value(step: Step, name: str, *, raw: bool = False) -> str:
    if name in step.args:
        return step.args[name] if raw else shlex.quote(step.args[name])
    return PLACEHOLDERS.get(name, "TEXT")
