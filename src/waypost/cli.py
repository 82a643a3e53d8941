"""The `waypost` command line: a thin adapter over the library.

Every verb takes --json (one document on stdout; errors as {"error": {...}} on stderr),
--store (or WAYPOST_URL) and --as (or WAYPOST_ACTOR). Exit codes: 0 ok, 1 unexpected,
2 usage or bad input, 3 refused by the rules, 4 not found, 5 conflict.

Only light modules are imported here: the hot verbs (heartbeat, show, block, ls) never load
an HTTP, MCP or PostgreSQL stack.
"""

from __future__ import annotations

import functools
import getpass
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from waypost import model, runs
from waypost.config import Config, load_config
from waypost.delivery import status as delivery_status
from waypost.durations import parse_duration, utcnow
from waypost.errors import InvalidInput, WaypostError
from waypost.liveness import observe
from waypost.model import TERMINAL, Packet, State, to_json
from waypost.store import STORE_DIR, STORE_FILE, Store, open_store

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    """What every verb gets: the store (opened lazily), the actor, the output mode."""

    def __init__(self, store_url: str | None, actor: str | None, as_json: bool) -> None:
        self.store_url = store_url
        self.actor = actor or os.environ.get("WAYPOST_ACTOR") or getpass.getuser()
        self.json = as_json
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.store_url)
        return self._store

    @functools.cached_property
    def config(self) -> Config:
        return load_config()

    def run(self, run_id: str, epoch: int | None = None) -> runs.Run:
        if epoch is None and os.environ.get("WAYPOST_EPOCH"):
            epoch = int(os.environ["WAYPOST_EPOCH"])
        return runs.Run(self.store, run_id, actor=self.actor, epoch=epoch)

    def emit(self, document: Any, text: str) -> None:
        if self.json:
            click.echo(to_json(document).decode())
        else:
            click.echo(text)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def verb(func: F) -> F:
    """Add --json, --store and --as to a command and hand it a Ctx."""

    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    @click.option("--store", "store_url", metavar="URL", envvar="WAYPOST_URL",
                  help="Store URL or path [env WAYPOST_URL; default: .waypost/ found upward].")
    @click.option("--as", "actor", metavar="ACTOR",
                  help="Who is acting [env WAYPOST_ACTOR; default: your user name].")
    @functools.wraps(func)
    def wrapper(as_json: bool, store_url: str | None, actor: str | None, **kwargs: Any) -> None:
        ctx = Ctx(store_url, actor, as_json)
        try:
            func(ctx, **kwargs)
        finally:
            ctx.close()

    return wrapper  # type: ignore[return-value]


def epoch_option(func: F) -> F:
    return click.option("--epoch", type=int, envvar="WAYPOST_EPOCH",
                        help="Your lease epoch from `claim` [env WAYPOST_EPOCH]; a stale "
                        "one is refused.")(func)


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


# Verbs that live in their own modules, imported only when called (or listed by --help), so
# the hot verbs never pay for them. Each feature area adds its line here.
LAZY_COMMANDS: dict[str, str] = {
    "doctor": "waypost.commands.ops:doctor",
    "migrate": "waypost.commands.ops:migrate",
    "review": "waypost.commands.review:review",
    "approve": "waypost.commands.review:approve",
    "deliver": "waypost.commands.delivery:deliver",
    "scan": "waypost.commands.review:scan",
    "watch": "waypost.commands.watch:watch",
    "resume": "waypost.commands.watch:resume",
    "prune": "waypost.commands.watch:prune",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            import importlib

            module, _, attr = LAZY_COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="waypost")
def cli() -> None:
    """Checkpoint packets for long-running agent work.

    \b
    A typical run:
      RUN=$(waypost start "Fix the flaky test" --owner alice --target file:result.md \\
            --kind long_running --max-silence 30m)
      waypost claim $RUN --as worker-1
      waypost heartbeat $RUN --as worker-1 --note "reproduced" --progress 0.3
      waypost evidence run $RUN --as worker-1 --kind test -- pytest -q
      waypost artifact add $RUN report.md --role report --as worker-1
      waypost ready $RUN --as worker-1 --summary "fixed" --artifact report.md
      waypost show $RUN
    """


@cli.command()
@verb
def init(ctx: Ctx) -> None:
    """Create a store in .waypost/ here (or at --store)."""
    url = ctx.store_url or str(Path.cwd() / STORE_DIR / STORE_FILE)
    ctx.store_url = url
    store = ctx.store
    folder = getattr(store, "path", Path(".")).parent
    if folder.name == STORE_DIR and not (folder / ".gitignore").exists():
        (folder / ".gitignore").write_text("*\n")
    ctx.emit({"store": store.url}, f"initialised {store.url}")


@cli.command()
@click.argument("title")
@click.option("--owner", help="Who reviews, approves and delivers [default: --as].")
@click.option("--target", metavar="URI", help="Where the final result goes: file:PATH, "
              "https://…, exec:CMD or none: (required for long_running).")
@click.option("--notify", metavar="URI", help="Where non-final notices go.")
@click.option("--kind", type=click.Choice([k.value for k in model.Kind]),
              help="bounded (inline) or long_running (detached) [default: from --expect].")
@click.option("--expect", metavar="DURATION", help="Expected duration; above the threshold "
              "(10m, [runs] long_running_after) means long_running.")
@click.option("--deadline", metavar="ISO|+DURATION", help="When the work must stop.")
@click.option("--heartbeat-interval", metavar="DURATION", help="Late after this silence.")
@click.option("--max-silence", metavar="DURATION", help="Silent (watchdog acts) after this.")
@click.option("--review-within", metavar="DURATION", help="Nudge the owner after this.")
@click.option("--gate", "gates", multiple=True, metavar="NAME=KIND:ARG",
              help="A check required before delivery, e.g. tests='command:pytest -q'.")
@click.option("--worker", help="Give the lease to this worker now (epoch 1).")
@click.option("--idempotency-key", metavar="KEY", help="Same key + same parameters → same run.")
@verb
def start(ctx: Ctx, title: str, owner: str | None, target: str | None, notify: str | None,
          kind: str | None, expect: str | None, deadline: str | None,
          heartbeat_interval: str | None, max_silence: str | None, review_within: str | None,
          gates: Sequence[str], worker: str | None, idempotency_key: str | None) -> None:
    """Record a run's packet before the work begins; prints the run id."""
    run, created = runs.start(
        ctx.store, title, actor=ctx.actor, owner=owner, target=target, notify=notify,
        kind=model.Kind(kind) if kind else None, expect=duration(expect), deadline=deadline,
        heartbeat_interval=duration(heartbeat_interval), max_silence=duration(max_silence),
        review_within=duration(review_within), gates=[runs.parse_gate(g) for g in gates],
        worker=worker, idempotency_key=idempotency_key, config=ctx.config)
    packet = run.packet
    ctx.emit({"run": packet.id, "created": created, "packet": shown(packet, ctx.store)},
             packet.id)


@cli.command()
@click.argument("run_id", metavar="RUN")
@verb
def claim(ctx: Ctx, run_id: str) -> None:
    """Take (or take over) the worker's lease; prints the new epoch."""
    run = ctx.run(run_id)
    packet = run.claim()
    ctx.emit({"run": run_id, "worker": ctx.actor, "epoch": run.epoch,
              "packet": shown(packet, ctx.store)}, str(run.epoch))


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--note", help="What you are doing now.")
@click.option("--progress", type=float, help="Fraction done, 0 to 1.")
@epoch_option
@verb
def heartbeat(ctx: Ctx, run_id: str, note: str | None, progress: float | None,
              epoch: int | None) -> None:
    """Say the worker is alive (and what it is doing)."""
    packet = ctx.run(run_id, epoch).heartbeat(note=note, progress=progress)
    ctx.emit({"run": run_id, "version": packet.version, "state": packet.state},
             f"{run_id} {packet.state} v{packet.version}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--kind", required=True, type=click.Choice([k.value for k in model.BlockerKind]))
@click.option("--detail", required=True, help="Specific: what is missing or failing.")
@epoch_option
@verb
def block(ctx: Ctx, run_id: str, kind: str, detail: str, epoch: int | None) -> None:
    """Open a blocker; prints its id."""
    packet, blocker_id = ctx.run(run_id, epoch).block(model.BlockerKind(kind), detail)
    ctx.emit({"run": run_id, "blocker": blocker_id, "state": packet.state}, blocker_id)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.argument("blocker_id", metavar="BLOCKER")
@click.option("--resolution", required=True, help="How it was resolved.")
@epoch_option
@verb
def unblock(ctx: Ctx, run_id: str, blocker_id: str, resolution: str, epoch: int | None) -> None:
    """Resolve a blocker; the last one returns the run to where it was."""
    packet = ctx.run(run_id, epoch).unblock(blocker_id, resolution)
    ctx.emit({"run": run_id, "state": packet.state,
              "open_blockers": [b.id for b in packet.open_blockers]},
             f"{run_id} {packet.state}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--summary", required=True, help="What was done (private to the owner).")
@click.option("--public-summary", help="Safe to show anyone.")
@click.option("--artifact", "artifacts", multiple=True, metavar="NAME",
              help="An artifact the result names (must be recorded).")
@epoch_option
@verb
def ready(ctx: Ctx, run_id: str, summary: str, public_summary: str | None,
          artifacts: Sequence[str], epoch: int | None) -> None:
    """Submit the result packet for the owner's review."""
    packet = ctx.run(run_id, epoch).ready(summary, public_summary, artifacts,
                                          config=ctx.config)
    ctx.emit({"run": run_id, "state": packet.state}, f"{run_id} {packet.state}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--reason", required=True)
@verb
def changes(ctx: Ctx, run_id: str, reason: str) -> None:
    """Owner: send the work back to in_progress, with the reason."""
    packet = ctx.run(run_id).changes(reason)
    ctx.emit({"run": run_id, "state": packet.state}, f"{run_id} {packet.state}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--authority", required=True, type=click.Choice([a.value for a in
                                                               model.Authority]))
@click.option("--to", "to", required=True, metavar="ACTOR")
@verb
def transfer(ctx: Ctx, run_id: str, authority: str, to: str) -> None:
    """Owner: hand an authority (approve, deliver) to another actor, on the record."""
    packet = ctx.run(run_id).transfer(model.Authority(authority), to)
    ctx.emit({"run": run_id, "transfers": packet.transfers},
             f"{run_id}: {to} may now {authority}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--reason", required=True)
@verb
def cancel(ctx: Ctx, run_id: str, reason: str) -> None:
    """Owner: stop the run for good, with the reason."""
    packet = ctx.run(run_id).cancel(reason)
    ctx.emit({"run": run_id, "state": packet.state}, f"{run_id} {packet.state}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--md", "as_md", is_flag=True, help="Markdown, for pasting into a thread.")
@click.option("--public", is_flag=True, help="Safe to share: the private summary dropped, "
              "private identifiers redacted.")
@verb
def show(ctx: Ctx, run_id: str, as_md: bool, public: bool) -> None:
    """The packet: state, liveness, watch, blockers, artifacts, evidence."""
    from waypost import render

    now = utcnow()
    packet = observed(ctx.store, [ctx.store.get(run_id)], now)[0]
    if public:
        from waypost.sanitize import public_packet

        packet = public_packet(packet, deny=ctx.config.deny, allow=ctx.config.allow)
    if as_md and not ctx.json:
        click.echo(render.show_markdown(packet, now), nl=False)
        return
    ctx.emit(packet, render.show_text(packet, now))


@cli.command(name="ls")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only these states (repeat, or comma-separate).")
@click.option("--owner", help="Only runs of this owner.")
@click.option("--all", "show_all", is_flag=True, help="Include delivered and cancelled runs.")
@click.option("--limit", default=100, show_default=True, help="At most this many rows.")
@verb
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


@cli.command()
@click.argument("run_id", metavar="RUN")
@verb
def log(ctx: Ctx, run_id: str) -> None:
    """The run's events, oldest first."""
    from waypost import render

    events = ctx.store.events(run_id)
    ctx.emit({"run": run_id, "events": events}, render.event_log(events))


@cli.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@verb
def verify(ctx: Ctx, run_id: str | None) -> None:
    """Recompute hash chains and folds; exit 3 naming the first broken run and seq."""
    from waypost.history import verify_run

    ids = [run_id] if run_id else ctx.store.run_ids()
    for rid in ids:
        verify_run(rid, ctx.store.events(rid), ctx.store.get(rid))
    ctx.emit({"verified": len(ids), "ok": True}, f"ok: {len(ids)} run(s) verified")


@cli.command()
@verb
def schema(ctx: Ctx) -> None:
    """The packet's JSON Schema (what `show --json` prints)."""
    click.echo(to_json(model.packet_schema()).decode())


# --- artifacts and evidence -------------------------------------------------------------


@cli.group()
def artifact() -> None:
    """Record and fetch durable outputs."""


@artifact.command(name="add")
@click.argument("run_id", metavar="RUN")
@click.argument("source", metavar="PATH|URL")
@click.option("--role", default="other", show_default=True,
              type=click.Choice([r.value for r in model.ArtifactRole]))
@click.option("--name", help="Name in the packet [default: the file name].")
@epoch_option
@verb
def artifact_add(ctx: Ctx, run_id: str, source: str, role: str, name: str | None,
                 epoch: int | None) -> None:
    """Record a file (copied into the store) or a URL (a reference)."""
    from waypost import artifacts

    packet = artifacts.add(ctx.run(run_id, epoch), source, role=model.ArtifactRole(role),
                           name=name, max_bytes=ctx.config.max_artifact_bytes)
    recorded = packet.artifacts[-1]
    ctx.emit({"run": run_id, "artifact": recorded},
             f"{recorded.name} {recorded.bytes or ''} {recorded.sha256 or recorded.url}")


@artifact.command(name="get")
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@click.option("-o", "--output", metavar="PATH", help="File or directory [default: ./NAME]; "
              "- for stdout.")
@verb
def artifact_get(ctx: Ctx, run_id: str, name: str, output: str | None) -> None:
    """Fetch a stored artifact's bytes (checked against its sha256)."""
    from waypost import artifacts

    recorded, data = artifacts.fetch(ctx.store, run_id, name)
    if output == "-":
        sys.stdout.buffer.write(data)
        return
    path = artifacts.write_out(data, recorded.name, output)
    ctx.emit({"run": run_id, "artifact": recorded.name, "path": str(path),
              "sha256": recorded.sha256}, str(path))


@cli.group()
def evidence() -> None:
    """Record what was actually checked."""


@evidence.command(name="run", context_settings={"ignore_unknown_options": True})
@click.argument("run_id", metavar="RUN")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--kind", default="command", show_default=True,
              type=click.Choice([k.value for k in model.EvidenceKind if k != "skipped"]))
@click.option("--cwd", type=click.Path(file_okay=False, exists=True))
@click.option("--timeout", metavar="DURATION", help="Kill after this [default: 1h].")
@epoch_option
@verb
def evidence_run(ctx: Ctx, run_id: str, command: Sequence[str], kind: str, cwd: str | None,
                 timeout: str | None, epoch: int | None) -> None:
    """Run `-- CMD ARGS…` and record exit code, duration, output tail and full log.

    The verb itself exits 0 once the evidence is recorded, whatever the verdict; the
    verdict is printed (and is `passed` only for exit code 0).
    """
    from waypost import evidence as ev

    packet = ev.record_command(
        ctx.run(run_id, epoch), command, kind=model.EvidenceKind(kind), cwd=cwd,
        timeout=duration(timeout) or ctx.config.evidence_timeout,
        tail_bytes=ctx.config.output_tail_bytes, echo=None if ctx.json else _echo_err)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict}: {recorded.summary}")


def _echo_err(chunk: bytes) -> None:
    click.echo(chunk.decode("utf-8", errors="replace"), err=True, nl=False)


@evidence.command(name="check")
@click.argument("run_id", metavar="RUN")
@click.argument("check", metavar="CHECK")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True),
              help="Run it here [default: the current directory].")
@epoch_option
@verb
def evidence_check(ctx: Ctx, run_id: str, check: str, cwd: str | None,
                   epoch: int | None) -> None:
    """Run a built-in check and record the result (assurance `recorded`).

    \b
    CHECK is one of:
      artifact:NAME        stored, hash intact, unchanged on disk, substantive content
      grep:PATTERN:PATH    the regex matches a line of PATH (file, directory or artifact)
      grep!:PATTERN:PATH   the regex matches no line of PATH
      no-private[:A,B]     nothing private in the artifacts and the public summary
      http:URL [TEXT]      GET answers 2xx (and the body contains TEXT)
      command:CMD          CMD exits 0
    Exits 0 once recorded, whatever the verdict; the verdict and its reason are printed.
    """
    from waypost import checks

    packet = checks.record_check(ctx.run(run_id, epoch), check, config=ctx.config, cwd=cwd)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict}: {recorded.summary}")


@evidence.command(name="skip")
@click.argument("run_id", metavar="RUN")
@click.option("--kind", required=True,
              type=click.Choice([k.value for k in model.EvidenceKind]))
@click.option("--reason", required=True, help='Named, e.g. "credential X unavailable".')
@epoch_option
@verb
def evidence_skip(ctx: Ctx, run_id: str, kind: str, reason: str, epoch: int | None) -> None:
    """Record a check that could not run, and why."""
    packet = ctx.run(run_id, epoch).skip_evidence(model.EvidenceKind(kind), reason)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded}, f"{recorded.id} skipped: {reason}")


@evidence.command(name="add")
@click.argument("run_id", metavar="RUN")
@click.option("--kind", required=True,
              type=click.Choice([k.value for k in model.EvidenceKind if k != "skipped"]))
@click.option("--verdict", required=True, type=click.Choice(["passed", "failed"]))
@click.option("--summary", required=True)
@epoch_option
@verb
def evidence_add(ctx: Ctx, run_id: str, kind: str, verdict: str, summary: str,
                 epoch: int | None) -> None:
    """Record a claim typed by hand (shown as `reported`, not `recorded`)."""
    packet = ctx.run(run_id, epoch).report_evidence(model.EvidenceKind(kind),
                                                    model.Verdict(verdict), summary)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict} (reported): {summary}")


@cli.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Work here "
              "[default: a new temporary directory].")
@verb
def demo(ctx: Ctx, directory: str | None) -> None:
    """Run a whole flow end to end on a fresh SQLite store and print the packet."""
    from waypost.demo import run_demo

    result = run_demo(directory, store_url=ctx.store_url, echo=None if ctx.json else click.echo)
    if ctx.json:
        ctx.emit(result, "")


# --- entry point ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (errors mapped in this one place)."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        # without standalone mode, click returns (not raises) the code of a verb's Exit
        code = cli.main(args=args, prog_name="waypost", standalone_mode=False)
    except WaypostError as exc:
        _report(exc.as_dict(), exc.exit_code, as_json)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        return 1
    except click.ClickException as exc:
        if as_json:
            _report({"code": "usage", "message": exc.format_message(), "hint": "--help"},
                    exc.exit_code, True)
        else:
            exc.show()
        return exc.exit_code
    except Exception as exc:
        if os.environ.get("WAYPOST_DEBUG"):
            raise
        _report({"code": "unexpected", "message": f"{type(exc).__name__}: {exc}",
                 "hint": "set WAYPOST_DEBUG=1 for the traceback"}, 1, as_json)
        return 1
    return code if isinstance(code, int) else 0


def _report(error: dict[str, str], code: int, as_json: bool) -> None:
    if as_json:
        click.echo(to_json({"error": error}).decode(), err=True)
        return
    click.echo(f"waypost: {error['message']}", err=True)
    if error.get("hint"):
        click.echo(f"  next: {error['hint']}", err=True)
