"""The click command tree: every verb's options, `--help` and click's parsing.

Loaded only for command lines the fast path in `waypost.cli` leaves to click (every verb
but a plainly written hot one), so the hot verbs never pay for click. The hot verbs'
commands are built here from their declarations in `waypost.cli`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from waypost import model, runs
from waypost.cli import (
    HOT,
    Ctx,
    duration,
    echo,
    epoch_option,
    invoke,
    report_error,
    shown,
    verb,
)
from waypost.cli_options import Verb
from waypost.model import to_json
from waypost.store import STORE_DIR, STORE_FILE

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


def hot_command(hot: Verb) -> click.Command:
    """A click command built from a hot verb's declaration."""

    def callback(**values: Any) -> None:
        invoke(hot.run, values)

    params: list[click.Parameter] = [a.argument() for a in hot.args]
    params.extend(o.option() for o in hot.options)
    return click.Command(hot.name, callback=callback, params=params, help=hot.run.__doc__)


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


for hot in HOT.values():
    cli.add_command(hot_command(hot))


@cli.command()
@verb
def init(ctx: Ctx) -> None:
    """Create a store in .waypost/ here (or at --store)."""
    url = ctx.store_url or str(Path.cwd() / STORE_DIR / STORE_FILE)
    ctx.store_url = url
    store = ctx.store
    folder = Path(getattr(store, "path", ".")).parent
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


def run_click(args: list[str], as_json: bool) -> int:
    """Run a command line through click, mapping click's own outcomes (usage errors, help,
    --version, an abort) to exit codes; a verb's WaypostError is left to `cli.main`."""
    try:
        # without standalone mode, click returns (not raises) the code of a verb's Exit
        code = cli.main(args=args, prog_name="waypost", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        echo("aborted", err=True)
        return 1
    except click.ClickException as exc:
        if as_json:
            report_error({"code": "usage", "message": exc.format_message(), "hint": "--help"},
                         True)
        else:
            exc.show()
        return exc.exit_code
    return code if isinstance(code, int) else 0
