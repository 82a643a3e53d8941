"""The README's first command: the whole story with real processes, on a store of its own,
checked here from the store and the receiver rather than from what the demo says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

from tests.helpers import dump_store
from waypost.cli.demo import DemoFailed, run_demo
from waypost.store import open_store

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_the_demo_tells_the_whole_story(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    exe = shutil.which("waypost", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "waypost"]
    other = tmp_path / "other" / ".waypost" / "waypost.db"
    subprocess.run([*command, "init", "--store", str(other)], env=env, check=True,
                   capture_output=True)
    before = dump_store(other)
    env.update(WAYPOST_URL=str(other), WAYPOST_WEBHOOK_SECRET=SECRET)
    work = tmp_path / "demo"
    proc = subprocess.run([*command, "demo", "--dir", str(work)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, check=False, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dump_store(other) == before, "the demo wrote into the store WAYPOST_URL names"

    for step in ("waypost watch", "waypost deliver", "kill -9", "waypost resume",
                 "--as worker-2", "(exit 3, as it should be)", "waypost review",
                 "waypost approve", "a second relay pass sent nothing more",
                 "ok: 1 run(s) verified"):
        assert step in proc.stdout, step

    log = [json.loads(line) for line in (work / "received" / "log.jsonl").read_text()
           .splitlines()]
    applied = [entry for entry in log if entry["outcome"] == "applied"]
    assert len({entry["headers"]["webhook-id"] for entry in applied}) == len(applied) == 1
    final = applied[0]
    webhook = Webhook(SECRET)
    verified = webhook.verify(final["body"], {k: final["headers"][k] for k in
                                              ("webhook-id", "webhook-timestamp",
                                               "webhook-signature")})
    assert verified["type"] == "final"
    run = verified["id"].removesuffix(".final")

    with open_store(str(work / ".waypost" / "waypost.db")) as store:
        packet = store.get(run)
        events = store.events(run)
        deliveries = store.deliveries([run])
    assert packet.state == "delivered"
    assert packet.receipt is not None
    assert packet.receipt.key == final["headers"]["webhook-id"]
    silent = [b for b in packet.blockers if b.kind == "worker_silent"]
    assert len(silent) == 1
    assert silent[0].opened_by.startswith("watchdog:")
    assert silent[0].resolved_by == "worker-2"
    takeover = next(e.seq for e in events if e.type == "claimed" and e.actor == "worker-2")
    assert not [e for e in events if e.seq > takeover and e.actor == "worker-1"], \
        "worker-1 wrote after it was fenced"
    assert [(d.purpose, d.topic, d.status) for d in deliveries if d.topic == "silent"] == [
        ("notice", "silent", "sent")]
    assert "silent" in (work / "notices.md").read_text()
    verify = subprocess.run([*command, "verify", "--store",
                             str(work / ".waypost" / "waypost.db")], env=env, check=False,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr


def test_the_demo_fails_when_the_watchdog_blocks_the_run_before_worker_one_claims_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded machine starts worker-1 late: past the 3s max-silence, the watchdog blocks
    the run nobody claimed yet. Then the story is not the one the demo tells, and the demo
    says so instead of narrating it as usual and exiting 0."""
    for name in [n for n in os.environ if n.startswith("WAYPOST_")]:
        monkeypatch.delenv(name)
    said: list[str] = []
    with pytest.raises(DemoFailed, match="before worker-1 claimed it") as failed:
        run_demo(str(tmp_path / "demo"), echo=said.append, worker_delay=6.0)
    assert failed.value.exit_code != 0
    assert "the story differs at step 3" in failed.value.message
    assert not any("# 5." in line for line in said), "the demo narrated on"
