"""`waypost watch` (the watchdog), `waypost resume` (a new worker takes over) and
`waypost prune` (retention)."""

from __future__ import annotations

import threading
from datetime import timedelta

import click

from waypost.cli.context import Ctx, duration, stopped_by_signals, verb
from waypost.core.observed import interval_text
from waypost.display import printable
from waypost.durations import parse_duration, utcnow
from waypost.errors import InvalidInput
from waypost.model import TERMINAL, State, WatcherRole, parse_states
from waypost.usecases import handoff, watchdog


@click.command()
@click.option("--once", is_flag=True, help="Sweep once and exit (for cron); the registration "
              "stays for its lease, so the runs count as watched until the next run. On "
              "PostgreSQL it stands by instead while another watcher holds the sweeper lock.")
@click.option("--interval", default="30s", show_default=True, metavar="DURATION",
              help="How often to sweep (with --once: how often cron runs it).")
@click.option("--lease", metavar="DURATION",
              help="How long the registration lasts without a beat [default: 3 intervals].")
@click.option("--owner", help="Watch only this owner's runs [default: every run].")
@click.option("--id", "watcher_id", metavar="ID",
              help="The watcher's name [default: HOST-PID; with --once: HOST-cron].")
@verb
def watch(ctx: Ctx, once: bool, interval: str, lease: str | None, owner: str | None,
          watcher_id: str | None) -> None:
    """The watchdog: sweep the runs whose next check is due, every interval.

    A silent worker's run is blocked (worker_silent), a passed deadline blocks it
    (deadline_passed), a review or a queued delivery left waiting nudges the owner once.
    While it runs, `show` and `ls` say the runs it covers are watched; SIGTERM or Ctrl-C
    releases its registration, and a killed watcher's lapses on its own.

    On PostgreSQL one watcher per scope (every run, or one --owner) sweeps at a time: it
    holds the scope's sweeper lock. The others stand by, registered, retry the lock every
    interval and take over when the holder dies or its lease ends.
    """
    every = parse_duration(interval, "--interval", positive=True)
    w = watchdog.Watch(ctx.store, interval=every, lease=duration(lease, "--lease", positive=True),
                       owner=owner,
                       watcher_id=watcher_id or watchdog.default_watcher_id(once=once,
                                                                           owner=owner))
    if once:
        try:
            report = w.turn()
        finally:
            w.give_up_lock()
        _Reports(ctx, quiet=False).show(report)
        return
    if not ctx.json:
        scope = f"runs of {owner}" if owner else "every run"
        click.echo(f"watching {scope} as {w.id} (sweep every {interval_text(every)}, lease "
                   f"{interval_text(w.lease)}); stop with Ctrl-C or SIGTERM")
    stop = threading.Event()
    with stopped_by_signals(stop):
        w.run(stop, _Reports(ctx, quiet=True).show,
              lambda exc: click.echo(f"waypost watch: sweep failed: {exc.message}", err=True))


class _Reports:
    """Prints each interval's report: every one with --json; else, for the daemon (`quiet`),
    what a sweep recorded or failed on and each change of role; for `--once`, the sweep, or
    that it stood by."""

    def __init__(self, ctx: Ctx, *, quiet: bool) -> None:
        self.ctx, self.quiet = ctx, quiet
        self.role: WatcherRole | None = None

    def show(self, report: watchdog.SweepReport) -> None:
        if self.ctx.json:
            self.ctx.emit(report, "")
            return
        changed, self.role = report.role is not self.role, report.role
        unusual = report.role is WatcherRole.STANDBY or report.took_over
        lines = [_role_line(report)] if (changed if self.quiet else unusual) else []
        if report.role is WatcherRole.ACTIVE and not (self.quiet and not report.actions
                                                      and not report.errors):
            lines.append(_sweep_line(report))
            lines += [f"  {a.run_id} #{a.seq} {a.recorded} → {a.state}" for a in report.actions]
            lines += [f"  error: {e}" for e in report.errors]
        if lines:
            click.echo(printable("\n".join(lines), limit=None))


def _role_line(report: watchdog.SweepReport) -> str:
    at = f"{report.at:%Y-%m-%d %H:%M:%S}Z {report.watcher}"
    if report.role is WatcherRole.STANDBY:
        by = f"{report.sweeper} sweeps" if report.sweeper else "another watcher holds the lock"
        return f"{at}: standby ({by}; retrying the sweeper lock every interval)"
    if report.took_over:
        return f"{at}: active sweeper (took the sweeper lock from a holder whose lease ended)"
    return f"{at}: active sweeper"


def _sweep_line(report: watchdog.SweepReport) -> str:
    return (f"{report.at:%Y-%m-%d %H:%M:%S}Z {report.watcher}: {report.examined} due, "
            f"{len(report.actions)} recorded, {report.deferred} deferred")


@click.command()
@click.argument("run_id", metavar="RUN")
@verb
def resume(ctx: Ctx, run_id: str) -> None:
    """Take over the worker's lease (epoch + 1) and print the handoff brief.

    The takeover rule is claim's: anyone may take a lease that is not live (never taken,
    expired, its worker silent or blocked as worker_silent); a live one only the owner,
    or whom the owner named with `waypost transfer RUN --authority takeover --to W`.
    The worker_silent blocker is resolved; the old worker's writes are refused from now on.
    """
    brief = ctx.run(run_id).resume()
    ctx.emit(brief, handoff.brief_text(brief, utcnow()))


@click.command()
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Prune runs finished longer ago than this, e.g. 90d.")
@click.option("--state", "states", default="delivered,cancelled", show_default=True,
              metavar="STATES", help="Finished states to prune (comma-separated).")
@click.option("--blob-grace", default="1h", show_default=True, metavar="DURATION",
              help="Keep blobs stored more recently than this (an artifact being recorded).")
@verb
def prune(ctx: Ctx, older_than: str, states: str, blob_grace: str) -> None:
    """Delete finished runs with their events, outbox rows and unreferenced blobs.

    Active runs are never pruned; `waypost verify` passes afterwards.
    """
    chosen = _finished_states(states)
    age = parse_duration(older_than, "--older-than")
    grace = parse_duration(blob_grace, "--blob-grace")
    now = utcnow()
    pruned = ctx.store.prune(before=now - timedelta(seconds=age), states=chosen,
                             blobs_before=now - timedelta(seconds=grace))
    ctx.emit(pruned, f"pruned {pruned.runs} run(s), {pruned.events} event(s), "
             f"{pruned.deliveries} outbox row(s), {pruned.blobs} blob(s) "
             f"({pruned.blob_bytes} B)" + (
                 f"; {pruned.unacknowledged} of those runs had news their owner had not "
                 "acknowledged (waypost inbox --ack)" if pruned.unacknowledged else ""))


def _finished_states(text: str) -> list[State]:
    chosen = parse_states([text])
    active = [s.value for s in chosen if s not in TERMINAL]
    if active or not chosen:
        raise InvalidInput(
            f"prune removes finished runs only; {', '.join(active) or 'no state'} "
            f"is not finished",
            hint="use --state delivered,cancelled (or one of them)")
    return chosen
