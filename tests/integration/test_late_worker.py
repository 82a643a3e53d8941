"""The late worker at the CLI, as a user meets it: the watchdog blocks a run as
worker_silent before the worker's process starts; the worker's `claim` prints its epoch
and takes the run over (the run in progress again, the blocker resolved by the claim), and
`show` never calls a run fresh while it is blocked as silent."""

from __future__ import annotations

import json
import time

from tests.helpers import Cli

SILENCE_S = 1.0


def _silent(cli: Cli, *start: str) -> str:
    """A run the watchdog (one sweep) blocked as worker_silent."""
    cli.ok("init")
    run = cli.ok("start", "Write the notes", "--owner", "alice", "--kind", "long_running",
                 "--target", "none:", "--max-silence", f"{SILENCE_S:g}s", *start)
    time.sleep(SILENCE_S + 0.2)  # past max-silence: the only way a real clock gets there
    cli.ok("watch", "--once", "--id", "test")
    packet = json.loads(cli.ok("show", run, "--json"))
    assert [b["kind"] for b in packet["blockers"] if not b.get("resolved_at")] == [
        "worker_silent"], packet
    return run


def test_a_late_workers_claim_takes_the_silent_run_over(cli: Cli) -> None:
    run = _silent(cli)
    assert cli.ok("claim", run, actor="w1") == "1"
    packet = json.loads(cli.ok("show", run, "--json"))
    assert packet["state"] == "in_progress"
    [blocker] = packet["blockers"]
    assert blocker["resolved_by"] == "w1"
    assert "w1 claimed the run (lease epoch 1)" in blocker["resolution"]
    cli.ok("heartbeat", run, "--note", "on it", actor="w1", epoch=1)
    assert json.loads(cli.ok("show", run, "--json"))["observed"]["liveness"] == "fresh"
    refused = cli("claim", run, actor="w2")
    assert refused.code == 3, refused.err  # the lease is w1's and live: not anyone's


def test_show_never_calls_a_run_blocked_as_silent_fresh(cli: Cli) -> None:
    run = _silent(cli, "--worker", "w1")
    cli.ok("heartbeat", run, "--note", "back again", actor="w1", epoch=1)
    packet = json.loads(cli.ok("show", run, "--json"))
    assert packet["state"] == "blocked"
    assert packet["observed"]["liveness"] == "silent"
    [liveness] = [line for line in cli.ok("show", run).splitlines()
                  if line.strip().startswith("liveness")]
    assert "silent" in liveness
    assert "fresh" not in liveness
