"""The run's lifecycle verbs: init, start, claim, unblock, ready, changes, transfer, cancel,
and the history's log, verify and schema."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from waypost import model
from waypost.cli.context import Ctx, epoch_option, reviewed_option, verb
from waypost.display import one_line
from waypost.errors import IntegrityError, RuleViolation
from waypost.model import to_json
from waypost.store import STORE_DIR, STORE_FILE, find_default
from waypost.usecases import starting
from waypost.usecases.views import observe_run


@click.command()
@click.option("--here", is_flag=True, help="Create it here even inside another store's "
              "folder tree (commands here will then use this one, not the outer one).")
@verb
def init(ctx: Ctx, here: bool) -> None:
    """Create a store in .waypost/ here (or at --store)."""
    mine = Path.cwd() / STORE_DIR / STORE_FILE
    outer = find_default() if ctx.store_url is None else None
    if outer is not None and Path(outer) != mine and not here:
        raise RuleViolation(
            f"this folder is inside the tree of the store at {outer}, which commands here "
            "use; a store here would hide it from them",
            hint="use the outer store as it is, or create a separate one here: "
                 "waypost init --here")
    url = ctx.store_url or str(mine)
    ctx.store_url = url
    store = ctx.store
    store.initialise()
    folder = Path(getattr(store, "path", ".")).parent
    if folder.name == STORE_DIR and not (folder / ".gitignore").exists():
        (folder / ".gitignore").write_text("*\n")
    ctx.emit({"store": store.url}, f"initialised {store.url}")


@click.command()
@click.argument("title")
@click.option("--owner", help="Who reviews, approves and delivers [default: --as].")
@click.option("--target", metavar="URI", help="Where the final result goes: file:PATH, "
              "https://…, exec:CMD, slack:CHANNEL_ID, slack-webhook:URL, github:OWNER/REPO#N, "
              "github-status:OWNER/REPO@SHA, mailto:ADDRESS or none: (required for "
              "long_running).")
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
@click.option("--session", metavar="ID", help="The agent host's session id: its hooks "
              "(`waypost hook`) find the run by it.")
@verb
def start(ctx: Ctx, title: str, owner: str | None, target: str | None, notify: str | None,
          kind: str | None, expect: str | None, deadline: str | None,
          heartbeat_interval: str | None, max_silence: str | None, review_within: str | None,
          gates: Sequence[str], worker: str | None, idempotency_key: str | None,
          session: str | None) -> None:
    """Record a run's packet before the work begins; prints the run id."""
    spec = starting.start_spec(  # every option decided before the store is opened
        title, owner=owner, target=target, notify=notify, kind=kind, expect=expect,
        deadline=deadline, heartbeat_interval=heartbeat_interval, max_silence=max_silence,
        review_within=review_within, gates=gates, worker=worker,
        idempotency_key=idempotency_key, session=session, config=ctx.config)
    run, created = starting.start(ctx.store, spec, actor=ctx.acting(), config=ctx.config)
    packet = run.packet
    warnings = _credential_warnings(target, notify)
    for warning in warnings:
        click.echo(f"warning: {one_line(warning)}", err=True)
    ctx.emit({"run": packet.id, "created": created, "packet": observe_run(ctx.store, packet),
              "warnings": warnings}, packet.id)


def _credential_warnings(target: str | None, notify: str | None) -> list[str]:
    """A Slack, GitHub or email target whose credential is not set here: said now, not
    days later (the relay blocks the run with its name)."""
    if not any(u and u.startswith(SERVICES) for u in (target, notify)):
        return []  # nothing to read for: file:, http(s):, exec:, none:
    from waypost.delivery.settings import credential_warnings

    return credential_warnings({"target": target, "notify": notify})


SERVICES = ("slack:", "github:", "github-status:", "mailto:")


@click.command()
@click.argument("run_id", metavar="RUN")
@verb
def claim(ctx: Ctx, run_id: str) -> None:
    """Take (or take over) the worker's lease; prints the new epoch."""
    run = ctx.run(run_id)
    packet = run.claim()
    ctx.emit({"run": run_id, "worker": ctx.actor, "epoch": run.epoch,
              "packet": observe_run(ctx.store, packet)}, str(run.epoch))


@click.command()
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


@click.command()
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


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--reason", required=True)
@reviewed_option
@verb
def changes(ctx: Ctx, run_id: str, reason: str, reviewed: str | None) -> None:
    """Owner: send the work back to in_progress, with the reason."""
    packet = ctx.run(run_id).changes(reason, reviewed=reviewed)
    ctx.emit({"run": run_id, "state": packet.state}, f"{run_id} {packet.state}")


@click.command()
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


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--reason", required=True)
@verb
def cancel(ctx: Ctx, run_id: str, reason: str) -> None:
    """Owner: stop the run for good, with the reason."""
    packet = ctx.run(run_id).cancel(reason)
    ctx.emit({"run": run_id, "state": packet.state}, f"{run_id} {packet.state}")


@click.command()
@click.argument("run_id", metavar="RUN")
@verb
def log(ctx: Ctx, run_id: str) -> None:
    """The run's events, oldest first."""
    from waypost.cli import render

    events = ctx.store.events(run_id)
    ctx.emit({"run": run_id, "events": events}, render.event_log(events))


@click.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@verb
def verify(ctx: Ctx, run_id: str | None) -> None:
    """Recompute hash chains and folds; exit 3 naming each broken run (and seq)."""
    from waypost.core.history import verify_run

    ids = [run_id] if run_id else ctx.store.run_ids()
    broken = []  # one run that does not verify (or read) never hides the others
    for rid in ids:
        try:
            verify_run(rid, ctx.store.events(rid), ctx.store.get(rid))
        except IntegrityError as exc:
            if run_id:
                raise
            broken.append(exc.message)
    if broken:
        more = f"; and {len(broken) - 5} more" if len(broken) > 5 else ""
        raise IntegrityError(f"{len(broken)} of {len(ids)} run(s) do not verify: "
                             f"{'; '.join(broken[:5])}{more}",
                             hint="see one with: waypost verify RUN; the store's state with: "
                             "waypost doctor")
    ctx.emit({"verified": len(ids), "ok": True}, f"ok: {len(ids)} run(s) verified")


@click.command()
@click.option("--statement", is_flag=True, help="The signed statement's schema instead "
              "(the in-toto predicate a bundle carries: waypost export).")
@verb
def schema(ctx: Ctx, statement: bool) -> None:
    """The packet's JSON Schema (what `show --json` prints)."""
    if statement:
        from waypost.core.statement import statement_schema

        click.echo(to_json(statement_schema()).decode())
        return
    click.echo(to_json(model.packet_schema()).decode())


COMMANDS: tuple[click.Command, ...] = (
    init, start, claim, unblock, ready, changes, transfer, cancel, log, verify, schema)
