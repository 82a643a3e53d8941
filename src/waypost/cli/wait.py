"""`waypost wait`: block until runs need the parent (or reach the states named), then say
where each stands; the exit code tells reached, timed out and ended otherwise apart."""

from __future__ import annotations

from collections.abc import Sequence

import click

from waypost.cli.context import Ctx, verb
from waypost.core.waiting import Outcome
from waypost.display import one_line
from waypost.model import Packet

# the exit code of each way a wait ends (README, "The CLI contract")
EXIT_OF: dict[Outcome, int] = {Outcome.REACHED: 0, Outcome.TIMED_OUT: 75, Outcome.ENDED: 6}


@click.command()
@click.argument("run_ids", metavar="RUN...", nargs=-1, required=True)
@click.option("--until", "until", multiple=True, metavar="STATES",
              help="Wait for these states (comma-separated or repeated) [default: whatever "
              "needs the parent: ready_for_review, blocked on an owner's blocker, delivered, "
              "cancelled].")
@click.option("--timeout", default="30m", show_default=True, metavar="DURATION",
              help="Stop waiting after this long (0: look once; at most 1d).")
@verb
def wait(ctx: Ctx, run_ids: Sequence[str], until: Sequence[str], timeout: str) -> None:
    """Wait until each RUN needs you (or reaches --until), then print where each stands.

    \b
    Needs the parent: ready_for_review, blocked on missing_input, permission_boundary,
    deadline_passed or delivery_failed (what only the owner resolves), delivered,
    cancelled. A worker's own obstacle or a silent worker does not end the wait.
    Exit 0 when every run got there, 75 when the timeout came first (wait again),
    6 when a run ended (delivered or cancelled) in a state not waited for, 4 for an
    unknown run (before any waiting).

    \b
    Example:
      waypost wait RUN --timeout 1h && waypost review RUN --as OWNER
    """
    from waypost.usecases import waiting

    runs = waiting.run_ids(run_ids, "RUN")
    states = waiting.until_states(until)
    seconds = waiting.wait_seconds(timeout, "--timeout", default=1800.0)
    waited = waiting.wait(ctx.store, runs, until=states, timeout=seconds)
    ctx.emit({"outcome": waited.outcome, "outcomes": waited.outcomes, "runs": waited.packets},
             lambda: "\n".join(status_line(p, waited.outcomes[p.id]) for p in waited.packets))
    code = EXIT_OF[waited.outcome]
    if code:
        raise click.exceptions.Exit(code)


def status_line(packet: Packet, outcome: Outcome) -> str:
    """One run in one line: id, state, how its wait ended, and why it needs the parent."""
    why = "; ".join(f"{b.kind}: {one_line(b.detail, limit=80)}" for b in packet.open_blockers)
    return f"{packet.id} {packet.state} ({outcome}) {one_line(why or packet.title, limit=100)}"
