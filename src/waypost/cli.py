"""The `waypost` command line: a thin adapter over the library.

Every verb takes --json (one document on stdout; errors as {"error": {...}} on stderr),
--store (or WAYPOST_URL) and --as (or WAYPOST_ACTOR). Exit codes: 0 ok, 1 unexpected,
2 usage or bad input, 3 refused by the rules, 4 not found, 5 conflict.

The hot verbs (heartbeat, show, block, ls) are declared here as data. A command line that
`cli_options.parse` fully understands runs without loading click; every other one, --help
included, goes to the click commands in `cli_click`, which are built from the same
declarations. Nothing here loads an HTTP, MCP or PostgreSQL stack. The `waypost`
executable reaches `main` through `waypost.entry`, which readies a hot verb's process first.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

from waypost import model
from waypost.cli_options import Arg, Opt, Verb, parse
from waypost.delivery import status as delivery_status
from waypost.durations import parse_duration, utcnow
from waypost.errors import InvalidInput, WaypostError
from waypost.liveness import observe
from waypost.model import TERMINAL, Packet, State, to_json
from waypost.store import Store, open_store

if TYPE_CHECKING:
    from waypost.config import Config
    from waypost.runs import Run

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    """What every verb gets: the store (opened lazily), the actor, the output mode."""

    def __init__(self, store_url: str | None, actor: str | None, as_json: bool) -> None:
        self.store_url = store_url
        self.actor = actor or os.environ.get("WAYPOST_ACTOR") or _user_name()
        self.json = as_json
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.store_url)
        return self._store

    @functools.cached_property
    def config(self) -> Config:
        from waypost.config import load_config

        return load_config()

    def run(self, run_id: str, epoch: int | None = None) -> Run:
        from waypost.runs import Run

        if epoch is None and os.environ.get("WAYPOST_EPOCH"):
            epoch = int(os.environ["WAYPOST_EPOCH"])
        return Run(self.store, run_id, actor=self.actor, epoch=epoch)

    def emit(self, document: Any, text: str) -> None:
        echo(to_json(document).decode() if self.json else text)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _user_name() -> str:
    import getpass

    return getpass.getuser()


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print as `click.echo` does. Text for a UTF-8 text stream is written as is; anything
    click treats specially (ANSI codes it may strip, a stream it would re-wrap) goes to
    click itself."""
    stream = sys.stderr if err else sys.stdout
    if "\x1b" in text or not _plain_text_stream(stream):
        import click

        click.echo(text, err=err, nl=nl)
        return
    stream.write(text + "\n" if nl else text)
    stream.flush()


def _plain_text_stream(stream: TextIO | None) -> bool:
    """A UTF-8 text stream, which click.echo would write to as it is."""
    encoding = getattr(stream, "encoding", None)
    if (not isinstance(stream, io.TextIOBase) or not isinstance(encoding, str)
            or stream.errors is None or sys.platform == "win32"):
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def invoke(func: Callable[..., None], values: dict[str, Any]) -> None:
    """Run a verb: a Ctx made from the common options, then the verb's own values."""
    ctx = Ctx(values.pop("store_url"), values.pop("actor"), values.pop("as_json"))
    try:
        func(ctx, **values)
    finally:
        ctx.close()


# --- the options every verb takes -------------------------------------------------------

COMMON = (
    Opt(name="--json", dest="as_json", flag=True, help="Print one JSON document."),
    Opt(name="--store", dest="store_url", metavar="URL", envvar="WAYPOST_URL",
        help="Store URL or path [env WAYPOST_URL; default: .waypost/ found upward]."),
    Opt(name="--as", dest="actor", metavar="ACTOR",
        help="Who is acting [env WAYPOST_ACTOR; default: your user name]."),
)
EPOCH = Opt(name="--epoch", dest="epoch", type=int, envvar="WAYPOST_EPOCH",
            help="Your lease epoch from `claim` [env WAYPOST_EPOCH]; a stale one is refused.")
RUN = Arg(dest="run_id", metavar="RUN")


def verb(func: F) -> F:
    """Add --json, --store and --as to a click command and hand it a Ctx."""

    @functools.wraps(func)
    def wrapper(**values: Any) -> None:
        invoke(func, values)

    command: Callable[..., None] = wrapper
    for opt in reversed(COMMON):  # as stacked decorators, so --help lists them in order
        command = opt.decorate(command)
    return cast(F, command)


def epoch_option(func: F) -> F:
    return EPOCH.decorate(func)


def duration(value: str | None) -> float | None:
    return None if value is None else parse_duration(value)


def observed(store: Store, packets: Sequence[Packet], now: datetime) -> list[Packet]:
    """Packets with their observed view (watch coverage, deliveries, relays), read in a
    fixed number of queries however many packets: what show, ls, start and claim print."""
    watchers = store.watchers(now=now)
    deliveries = store.deliveries([p.id for p in packets])
    relays = store.relays(now=now) if delivery_status.waiting(deliveries) else None
    by_run = delivery_status.by_run(deliveries)
    return [observe(p, now, watchers, by_run.get(p.id, ()), relays) for p in packets]


def shown(packet: Packet, store: Store) -> Packet:
    return observed(store, [packet], utcnow())[0]


# --- the hot verbs ----------------------------------------------------------------------


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


def show(ctx: Ctx, run_id: str, as_md: bool, public: bool) -> None:
    """The packet: state, liveness, watch, blockers, artifacts, evidence."""
    from waypost import render

    now = utcnow()
    packet = observed(ctx.store, [ctx.store.get(run_id)], now)[0]
    if public:
        from waypost.sanitize import public_packet

        packet = public_packet(packet, deny=ctx.config.deny, allow=ctx.config.allow)
    if as_md and not ctx.json:
        echo(render.show_markdown(packet, now), nl=False)
        return
    ctx.emit(packet, render.show_text(packet, now))


def ls_(ctx: Ctx, states: Sequence[str], owner: str | None, show_all: bool, limit: int) -> None:
    """The board: active runs, most recently updated first."""
    from waypost import render

    wanted = _states(states) or (None if show_all else [s for s in State if s not in TERMINAL])
    now = utcnow()
    packets = observed(ctx.store, ctx.store.list_runs(states=wanted, owner=owner,
                                                      limit=limit), now)
    ctx.emit({"runs": packets}, render.board(packets, now))


def _states(values: Sequence[str]) -> list[State]:
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    try:
        return [State(n) for n in names]
    except ValueError:
        known = ", ".join(s.value for s in State)
        raise InvalidInput(f"unknown state in {', '.join(names)} (known: {known})") from None


HOT = {v.name: v for v in (
    Verb(name="heartbeat", run=heartbeat, args=(RUN,), options=(
        Opt(name="--note", dest="note", help="What you are doing now."),
        Opt(name="--progress", dest="progress", type=float, help="Fraction done, 0 to 1."),
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
        *COMMON)),
    Verb(name="ls", run=ls_, options=(
        Opt(name="--state", dest="states", multiple=True, metavar="STATE",
            help="Only these states (repeat, or comma-separate)."),
        Opt(name="--owner", dest="owner", help="Only runs of this owner."),
        Opt(name="--all", dest="show_all", flag=True,
            help="Include delivered and cancelled runs."),
        Opt(name="--limit", dest="limit", type=int, default=100, show_default=True,
            help="At most this many rows."),
        *COMMON)),
)}


def _hot_values(args: Sequence[str]) -> dict[str, Any] | None:
    """The hot verb's values when its command line is fully understood without click."""
    hot = HOT.get(args[0]) if args else None
    if hot is None or os.environ.get("_WAYPOST_COMPLETE"):  # shell completion is click's
        return None
    return parse(hot, args[1:])


# --- entry point ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, fast: bool = True) -> int:
    """Run the CLI; returns the exit code (errors mapped in this one place). `fast=False`
    sends every command line through click, as any the fast path does not understand is."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        values = _hot_values(args) if fast else None
        if values is None:
            from waypost.cli_click import run_click

            return run_click(args, as_json)
        invoke(HOT[args[0]].run, values)
    except WaypostError as exc:
        report_error(exc.as_dict(), as_json)
        return exc.exit_code
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)  # as click reports an interrupted command: end the ^C line
        echo("aborted", err=True)
        return 1
    except BrokenPipeError:  # the reader went away (`waypost ls | head -1`)
        _ignore_closed_pipes()
        return 1
    except Exception as exc:
        if os.environ.get("WAYPOST_DEBUG"):
            raise
        report_error({"code": "unexpected", "message": f"{type(exc).__name__}: {exc}",
                      "hint": "set WAYPOST_DEBUG=1 for the traceback"}, as_json)
        return 1
    return 0


def report_error(error: dict[str, str], as_json: bool) -> None:
    if as_json:
        echo(to_json({"error": error}).decode(), err=True)
        return
    echo(f"waypost: {error['message']}", err=True)
    if error.get("hint"):
        echo(f"  next: {error['hint']}", err=True)


class _ClosedPipeFlush:
    """A standard stream whose flush ignores a closed pipe, so the interpreter's last
    flush at exit prints no traceback (what click does for the commands it runs)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def flush(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _ignore_closed_pipes() -> None:
    sys.stdout = cast(TextIO, _ClosedPipeFlush(sys.stdout))
    sys.stderr = cast(TextIO, _ClosedPipeFlush(sys.stderr))
