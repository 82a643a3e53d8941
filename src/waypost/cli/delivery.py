"""`waypost deliver`: the outbox relay, once (`--once`) or as a daemon until SIGTERM/SIGINT."""

from __future__ import annotations

import threading

import click

from waypost.cli.context import Ctx, duration, stopped_by_signals, verb
from waypost.core import receipts
from waypost.delivery.relay import Relay
from waypost.delivery.settings import DeliverySettings, delivery_root, load_settings
from waypost.delivery.signing import secret_key
from waypost.display import one_line
from waypost.durations import format_duration, parse_duration
from waypost.errors import Refused
from waypost.model import Delivery, DeliveryStatus


@click.command()
@click.option("--once", is_flag=True, help="Drain what is due now, then exit: 0 when "
              "nothing failed for good, 3 when a delivery did (its run is blocked).")
@click.option("--backoff-base", metavar="DURATION",
              help="First retry delay; doubles per attempt, with jitter "
              "[default: 5s; [delivery] backoff_base in waypost.toml].")
@click.option("--max-delay", metavar="DURATION", help="Longest wait between attempts "
              "[default: 1h; [delivery] max_delay].")
@click.option("--horizon", metavar="DURATION", help="Retry this long after a delivery was "
              "queued, then fail it for good [default: 3d; [delivery] horizon].")
@click.option("--timeout", metavar="DURATION", help="Cut one send off after this "
              "[default: 30s; [delivery] timeout].")
@click.option("--interval", metavar="DURATION", default="1s", show_default=True,
              help="Daemon: look for newly queued deliveries this often.")
@click.option("--relay-id", metavar="ID", help="This relay's name, after relay: "
              "[default: relay:HOST:PID:XXXX].")
@click.option("--dir", "files_root", type=click.Path(file_okay=False), help="The delivery "
              "root: relative file: targets are relative to this, and no file: target writes "
              "outside it (or [delivery] allow_paths) [default: the folder holding .waypost/, "
              "else the folder holding waypost.toml, else here].")
@verb
def deliver(ctx: Ctx, once: bool, backoff_base: str | None, max_delay: str | None,
            horizon: str | None, timeout: str | None, interval: str,
            relay_id: str | None, files_root: str | None) -> None:
    """The outbox relay: send each queued final delivery and notice to its target.

    \b
    Webhooks are signed per Standard Webhooks with the whsec_ secret in
    WAYPOST_WEBHOOK_SECRET (or [delivery] webhook_secret); webhook-id is the delivery's
    idempotency key, the same on every retry.
    """
    poll = parse_duration(interval, "--interval", positive=True)  # decided before any claim
    settings = load_settings(
        backoff_base=duration(backoff_base, "--backoff-base", positive=True),
        max_delay=duration(max_delay, "--max-delay", positive=True),
        horizon=duration(horizon, "--horizon", positive=True),
        timeout=duration(timeout, "--timeout", positive=True),
        files_root=files_root or _project_root(ctx))
    _check_secret(ctx, settings, warn=not once)
    relay = Relay(ctx.store, settings=settings, relay_id=relay_id, deny=ctx.config.deny,
                  allow=ctx.config.allow, report=None if ctx.json else _print)
    if once:
        relay.beat()
        try:
            done = relay.drain()
        finally:
            relay.leave()
        failed = [d for d in done if d.status is DeliveryStatus.FAILED]
        if ctx.json or not done:
            ctx.emit({"relay": relay.id, "attempted": done, "failed": len(failed)},
                     "nothing due")
        if failed:  # so that cron, CI or a script notices: the run is blocked now
            raise Refused(f"{len(failed)} deliver{'y' if len(failed) == 1 else 'ies'} failed "
                          f"for good: {', '.join(d.key for d in failed)}",
                          hint=f"see why: waypost show {failed[0].run_id}; then send it "
                          f"elsewhere: waypost retarget {failed[0].run_id} URI, or fix the "
                          "target and unblock the run")
        return
    stop = threading.Event()
    if not ctx.json:
        click.echo(f"{relay.id}: delivering from {ctx.store.url} (stop with Ctrl-C or SIGTERM)")
    with stopped_by_signals(stop):
        relay.serve(stop, poll=poll)
    ctx.emit({"relay": relay.id, "stopped": True}, f"{relay.id}: stopped")


def _project_root(ctx: Ctx) -> str:
    """Where `waypost start` decided relative file: targets from: the folder holding
    `.waypost/` for an embedded store, else the folder holding waypost.toml, else here."""
    return delivery_root(getattr(ctx.store, "path", None), ctx.config.path)


def _check_secret(ctx: Ctx, settings: DeliverySettings, *, warn: bool) -> None:
    if settings.webhook_secret:
        secret_key(settings.webhook_secret)  # a malformed secret is refused now, not per send
    elif warn and not ctx.json:
        click.echo("note: no webhook secret (WAYPOST_WEBHOOK_SECRET): deliveries to http(s) "
                   "targets will wait, retrying, until one is set", err=True)


def _print(delivery: Delivery) -> None:
    click.echo(one_line(describe(delivery)))  # an error or receipt may quote the target


def describe(delivery: Delivery) -> str:
    """One line per attempt: key, target, and what came of it."""
    head = f"{delivery.key} → {delivery.target}"
    if delivery.status is DeliveryStatus.SENT:
        return f"{head}: sent ({receipts.shown(delivery.receipt)})"
    if delivery.status is DeliveryStatus.FAILED:
        return f"{head}: FAILED for good: {delivery.last_error}"
    wait = (delivery.next_attempt_at - (delivery.last_attempt_at or delivery.next_attempt_at))
    return (f"{head}: attempt {delivery.attempts} failed ({delivery.last_error}); next in "
            f"{format_duration(wait.total_seconds())}")
