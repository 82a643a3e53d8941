"""The hot verbs (heartbeat, show, block, ls, hook), declared as data.

A command line that `context.parse` fully understands runs without loading click; every
other one, --help included, goes to the click commands in `waypost.cli.app`, which are
built from the same declarations. Nothing here loads an HTTP, MCP or PostgreSQL stack.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from waypost import model
from waypost.cli.context import COMMON, EPOCH, RUN, Arg, Ctx, Opt, Verb, echo, parse
from waypost.durations import utcnow
from waypost.inputs import LIMIT_MAX, fraction, row_limit
from waypost.model import TERMINAL, State, parse_states


def heartbeat(ctx: Ctx, run_id: str, note: str | None, progress: float | None,
              epoch: int | None) -> None:
    """Say the worker is alive (and what it is doing)."""
    packet = ctx.run(run_id, epoch).heartbeat(note=note, progress=progress)
    ctx.emit({"run": run_id, "version": packet.version, "state": packet.state},
             f"{run_id} {packet.state} v{packet.version}")


def block(ctx: Ctx, run_id: str, kind: str, detail: str, epoch: int | None) -> None:
    """Open a blocker; prints its id."""
    packet, blocker_id = ctx.run(run_id, epoch).block(model.BlockerKind(kind), detail)
    ctx.emit({"run": run_id, "blocker": blocker_id, "state": packet.state}, blocker_id)


def show(ctx: Ctx, run_id: str, as_md: bool, public: bool, as_a2a: bool) -> None:
    """The packet: state, liveness, watch, blockers, artifacts, evidence."""
    from waypost.usecases.views import observe_runs  # here: heartbeat and block never read it

    now = utcnow()
    packet = observe_runs(ctx.store, [ctx.store.get(run_id)], now)[0]
    if public:
        from waypost.core.sanitize import public_packet

        packet = public_packet(packet, deny=ctx.config.deny, allow=ctx.config.allow)
    if as_a2a:  # a JSON document whatever the output mode: the A2A Task is one
        from waypost.usecases.a2a import task

        echo(model.to_json(task(packet)).decode())
        return
    if as_md and not ctx.json:
        from waypost.cli import render

        echo(render.show_markdown(packet, now), nl=False)
        return
    ctx.emit(packet, lambda: _show_text(packet, now))


def _show_text(packet: model.Packet, now: datetime) -> str:
    from waypost.cli import render  # here: `show --json` never renders

    return render.show_text(packet, now)


def ls_(ctx: Ctx, states: Sequence[str], owner: str | None, show_all: bool, limit: int) -> None:
    """The board: active runs, most recently updated first."""
    from waypost.cli import render
    from waypost.store.shared import Skipped
    from waypost.usecases.views import observe_runs

    wanted = parse_states(states) or (None if show_all else [s for s in State if s not in TERMINAL])
    now = utcnow()
    skipped: list[Skipped] = []  # rows that do not read: named, never hiding the others
    packets = observe_runs(ctx.store, ctx.store.list_runs(states=wanted, owner=owner,
                                                      limit=limit, skipped=skipped), now)
    ctx.emit({"runs": packets, "skipped": skipped} if skipped else {"runs": packets},
             render.board(packets, now))
    for row in [] if ctx.json else skipped:
        echo(f"waypost: skipped run {row.run_id}: {row.reason} (see: waypost doctor)", err=True)


def hook(ctx: Ctx, event: str, host: str, cap: int) -> None:
    """An agent host's hook: the host's JSON on stdin, its answer on stdout (exit 0).

    EVENT is stop, subagent-stop, session-start or user-prompt-submit (`waypost hooks
    install` registers each under the host's own name for it)."""
    from waypost.cli.hook import answer  # here: the other hot verbs never read it

    answer(ctx, event, host, cap)


def stop_cap(text: str) -> int:
    """`--cap`: consecutive refusals of one session before the agent is let stop."""
    from waypost.hooks.cap import read_cap  # one bound for both hook doors

    return read_cap(text)


HOT = {v.name: v for v in (
    Verb(name="heartbeat", run=heartbeat, args=(RUN,), options=(
        Opt(name="--note", dest="note", help="What you are doing now."),
        Opt(name="--progress", dest="progress", type=partial(fraction, field="--progress"),
            metavar="FRACTION", help="Fraction done, 0 to 1."),
        EPOCH, *COMMON)),
    Verb(name="block", run=block, args=(RUN,), options=(
        Opt(name="--kind", dest="kind", required=True,
            choices=tuple(k.value for k in model.BlockerKind)),
        Opt(name="--detail", dest="detail", required=True,
            help="Specific: what is missing or failing."),
        EPOCH, *COMMON)),
    Verb(name="show", run=show, args=(RUN,), options=(
        Opt(name="--md", dest="as_md", flag=True, help="Markdown, for pasting into a thread."),
        Opt(name="--public", dest="public", flag=True, help="Safe to share: the private "
            "summary dropped, private identifiers redacted."),
        Opt(name="--a2a", dest="as_a2a", flag=True, help="As an A2A v1 Task (ProtoJSON)."),
        *COMMON)),
    Verb(name="ls", run=ls_, options=(
        Opt(name="--state", dest="states", multiple=True, metavar="STATE",
            help="Only these states (repeat, or comma-separate)."),
        Opt(name="--owner", dest="owner", help="Only runs of this owner."),
        Opt(name="--all", dest="show_all", flag=True,
            help="Include delivered and cancelled runs."),
        Opt(name="--limit", dest="limit", type=row_limit, default=100, show_default=True,
            metavar="N", help=f"At most this many rows (1 to {LIMIT_MAX})."),
        *COMMON)),
    Verb(name="hook", run=hook, args=(Arg(dest="event", metavar="EVENT"),), options=(
        Opt(name="--host", dest="host", required=True,
            choices=("claude", "codex", "gemini", "cursor"),
            help="The agent host whose hook this is."),
        Opt(name="--cap", dest="cap", type=stop_cap, default=8, show_default=True,
            metavar="N", envvar="WAYPOST_STOP_CAP", help="Refuse one session's stop this "
            "many times in a row at most, then record a blocker and let it stop "
            "[env WAYPOST_STOP_CAP]."),
        *COMMON)),
)}


def hot_values(args: Sequence[str]) -> dict[str, Any] | None:
    """The hot verb's values when its command line is fully understood without click."""
    hot = HOT.get(args[0]) if args else None
    if hot is None or os.environ.get("_WAYPOST_COMPLETE"):  # shell completion is click's
        return None
    return parse(hot, args[1:])
