"""`waypost retarget`: the owner sends a run's result (or its notices) somewhere else before
it is delivered."""

from __future__ import annotations

import click

from waypost.cli.context import Ctx, verb
from waypost.core.observed import final_of


@click.command()
@click.argument("run_id", metavar="RUN")
@click.argument("target", metavar="[URI]", required=False)
@click.option("--notify", metavar="URI", help="Send the run's notices here from now on.")
@click.option("--accept-duplicate", is_flag=True,
              help="Move the delivery although an earlier attempt's outcome is unknown (it "
              "timed out after sending): the old target may already have the result, and the "
              "history says you accepted that.")
@verb
def retarget(ctx: Ctx, run_id: str, target: str | None, notify: str | None,
             accept_duplicate: bool) -> None:
    """Owner: change where the run's result (URI) or notices (--notify) go, before delivery.

    \b
    URI is a target as `start` takes it: file:PATH, https://…, exec:CMD or none:.
    Allowed while the run is in_progress, blocked, ready_for_review or approved. A run
    blocked because its final delivery failed for good is unblocked in the same write: the
    same delivery (same key, same webhook-id) is queued again, to URI. Then:
      waypost deliver --once
    Refused (exit 5) while a relay is sending it, and (exit 3) when an earlier attempt's
    outcome is unknown unless you pass --accept-duplicate.

    \b
    Example:
      waypost retarget RUN file:result.md --as OWNER
    """
    packet = ctx.run(run_id).retarget(target, notify, accept_duplicate, config=ctx.config)
    final = final_of(ctx.store.deliveries([run_id]))
    queued = (f"; final delivery {final.key} {final.status} → {final.target}"
              if final is not None else "")
    notice = f" (notify {packet.notify})" if notify is not None and packet.notify else ""
    ctx.emit({"run": run_id, "state": packet.state, "target": packet.target,
              "notify": packet.notify, "accept_duplicate": accept_duplicate,
              "delivery": final},
             f"{run_id} {packet.state}: target {packet.target}{notice}{queued}")
