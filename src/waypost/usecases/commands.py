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


# the verbs a worker's process writes under its lease (`--epoch`)
UNDER_LEASE: Final = frozenset({"heartbeat", "block", "unblock", "artifact", "evidence",
                                "ready", "add_gate"})
EVIDENCE: Final = {"check": "evidence check", "skip": "evidence skip",
                   "command": "evidence run"}


def verb_words(step: Step) -> str:
    """The CLI's words for the step's verb (`evidence run`, `check` or `skip` by its form)."""
    return EVIDENCE[step.form] if step.form else WORDS.get(step.verb, step.verb)


def command(step: Step, *, epoch: int | None = None) -> str:
    """The command line that takes `step`; with `epoch`, as the process holding the lease
    at that epoch (`--epoch N` after `--as`: given only to whom holds it)."""
    words = ["waypost", *verb_words(step).split()]
    if step.run is not None:
        words.append(shlex.quote(step.run))
    words += _arguments(step)
    if step.actor is not None:
        words += ["--as", shlex.quote(step.actor)]
    if epoch is not None:
        words += ["--epoch", str(epoch)]
    if "command" in step.args or "command" in step.fill:
        words += ["--", _value(step, "command", raw=True)]
    return " ".join(words)


def for_caller(step: Step, actor: str, run: str, epoch: int | None, *,
               fenced: bool) -> str:
    """A refusal's next step as the command line for the caller who was refused: a step
    for whoever was refused (actor None) is written `--as` the actor the caller named, and
    a write under the lease on the caller's own run carries the caller's epoch, unless the
    refusal fenced that epoch (it is never handed on). A step for someone else is theirs
    as it stands."""
    if step.actor is not None:
        return command(step)
    lease = (epoch if epoch is not None and not fenced and step.run == run
             and step.verb in UNDER_LEASE else None)
    mine = Step(verb=step.verb, run=step.run, args=step.args, fill=step.fill, actor=actor,
                why=step.why)
    return command(mine, epoch=lease)


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


def fallback_notice(user: str) -> str:
    """What a write with no `--as` and no `WAYPOST_ACTOR` says once on stderr: whom it acts
    as (the user's own name) and how to name the actor instead."""
    return (f"waypost: acting as {shlex.quote(user)}, your user name: no --as was given and "
            "WAYPOST_ACTOR is not set. To act as someone, pass --as ACTOR or "
            "export WAYPOST_ACTOR=ACTOR")
