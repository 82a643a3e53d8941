"""The delivery-fault campaign: approved runs across the targets (Slack, a Slack incoming
webhook, a GitHub comment, a commit status, email, a signed webhook, a file), 30% of the
requests failing at random (errors, 429s, timeouts after acceptance, dropped connections),
relay processes killed with SIGKILL at random moments. Every run ends delivered, or blocked
with delivery_failed where the target is permanently wrong by design; Slack shows one
message per run, GitHub one comment per run, the deduping webhook receiver applies each
delivery once, and the at-least-once targets' duplicates are counted and reported.

The clock is injected (real time shifted by a file's seconds: a killed relay's lease is
expired by moving it, not by waiting). CI runs CAMPAIGN_RUNS runs; WAYPOST_CAMPAIGN=long
runs 200."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.campaign_relay import shifted_clock
from tests.delivery_support import approved_run, new_secret
from tests.fake_services import FAULTS, FakeGitHub, FakeSlack, FaultyApi
from tests.fake_smtp import SmtpServer
from tests.helpers import FakeClock
from waypost.core import outbox
from waypost.delivery.receiver import Message, Receiver
from waypost.model import BlockerKind, DeliveryStatus, Purpose, State
from waypost.store import Store, open_store

LONG = os.environ.get("WAYPOST_CAMPAIGN") == "long"
CAMPAIGN_RUNS = 200 if LONG else 30
FAULT_RATE = 0.3
LEASE_PASSED = 32.0  # seconds the clock moves after a kill: past the relays' 31 s lease
WALL_LIMIT = 1200.0 if LONG else 90.0  # seconds: a campaign that does not settle fails
CHANNEL = "C0CAMPAIGN"
SHA = "0123456789abcdef0123456789abcdef0123456"
ROOT = Path(__file__).resolve().parents[2]


class HookReceiver(FaultyApi):
    """A webhook receiver that dedupes with `waypost.delivery.receiver` (and fails on command)."""

    def __init__(self, receiver: Receiver, **faults: Any) -> None:
        super().__init__("", **faults)
        self.receiver = receiver
        self.applied: list[str] = []

    def route(self, method: str, path: str, query: dict[str, str], body: Any,
              headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        status, text = self.receiver.handle(self.raw, headers, self._apply)
        return status, {}, text

    def _apply(self, message: Message) -> None:
        self.applied.append(message.id)


def target(i: int, hook: str, slack: FakeSlack) -> str:
    """Run `i`'s target; every tenth names a repository that does not exist (permanent)."""
    if i % 10 == 9:
        return "github:octo/gone#1"
    return [f"slack:{CHANNEL}", f"slack-webhook:{slack.hook}", f"github:octo/app#{i}",
            f"github-status:octo/app@{SHA}{i % 10}", f"mailto:run{i}@example.com", hook,
            f"file:out/{i}.md"][i % 7]


@pytest.fixture
def services(tmp_path: Path) -> Iterator[dict[str, Any]]:
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")
    secret = new_secret()
    seed = random.randrange(1 << 30)
    receiver = Receiver(secret, tmp_path / "received.db",
                        clock=lambda: shifted_clock(clock_file)().timestamp())
    with ExitStack() as stack:
        found = {
            "slack": stack.enter_context(FakeSlack("xoxb-c", channels=(CHANNEL,),
                                                   rate=FAULT_RATE, seed=seed).running()),
            "github": stack.enter_context(FakeGitHub(
                "ghp_c", repos=("octo/app",), rate=FAULT_RATE, seed=seed + 1,
                faults=(*FAULTS, "ratelimit")).running()),
            "smtp": stack.enter_context(SmtpServer(rate=FAULT_RATE, seed=seed + 2).running()),
            "hook": stack.enter_context(HookReceiver(receiver, rate=FAULT_RATE,
                                                     seed=seed + 3).running()),
        }
        yield {**found, "secret": secret, "clock_file": clock_file, "seed": seed}
    receiver.close()


def relay_env(s: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, "SLACK_BOT_TOKEN": "xoxb-c", "WAYPOST_SLACK_API": s["slack"].url,
            "GITHUB_TOKEN": "ghp_c", "GITHUB_API_URL": s["github"].api,
            "WAYPOST_SMTP_URL": s["smtp"].url, "WAYPOST_SMTP_FROM": "relay@example.com",
            "WAYPOST_WEBHOOK_SECRET": s["secret"], "PYTHONPATH": str(ROOT)}


def unsettled(store: Store, run_ids: list[str]) -> int:
    return sum(1 for d in store.deliveries(run_ids)
               if d.purpose is Purpose.FINAL and d.status is DeliveryStatus.QUEUED)


def campaign(store: Store, run_ids: list[str], spawn: Callable[[], subprocess.Popen[bytes]],
             advance: Callable[[float], None], rng: random.Random) -> int:
    """Relays started and SIGKILLed at random until every final delivery settles; returns
    how many relays were killed."""
    began, kills = time.monotonic(), 0
    while unsettled(store, run_ids):
        assert time.monotonic() - began < WALL_LIMIT, "the campaign did not settle"
        relays = [spawn() for _ in range(rng.choice((1, 1, 2)))]
        time.sleep(rng.uniform(0.3, 1.2))  # a relay starts in ~0.4 s, then sends
        for proc in relays:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            kills += 1
        advance(LEASE_PASSED)  # a killed relay's lease is over: another may take its row
    return kills


def test_every_run_is_delivered_once_where_once_can_be_known(
        services: dict[str, Any], tmp_path: Path) -> None:
    s = services
    store_path = tmp_path / ".waypost" / "w.db"
    clock = FakeClock(shifted_clock(s["clock_file"])())
    with open_store(str(store_path)) as store:
        uris = {}
        for i in range(CAMPAIGN_RUNS):
            uri = target(i, s["hook"].url + "/hook", s["slack"])
            uris[approved_run(store, clock, target=uri, title=f"Campaign run {i}")] = uri
        run_ids = list(uris)

        def spawn() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.campaign_relay", str(store_path),
                 str(s["clock_file"]), str(tmp_path)], env=relay_env(s), cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def advance(seconds: float) -> None:
            shift = float(s["clock_file"].read_text()) + seconds
            s["clock_file"].write_text(str(shift))

        rng = random.Random(s["seed"])
        kills = campaign(store, run_ids, spawn, advance, rng)
        report = check_outcomes(store, uris, s, tmp_path)
    report.update(runs=CAMPAIGN_RUNS, relays_killed=kills, seed=s["seed"],
                  faults_made=len(s["slack"].faulted) + len(s["github"].faulted)
                  + len(s["smtp"].faulted) + len(s["hook"].faulted))
    line = "delivery-fault campaign: " + ", ".join(f"{k}={v}" for k, v in report.items())
    print(line)
    (tmp_path / "campaign.txt").write_text(line + "\n")


def check_outcomes(store: Store, uris: dict[str, str], s: dict[str, Any],
                   tmp_path: Path) -> dict[str, Any]:
    """Assert the campaign's guarantees; return what it counted."""
    blocked_by_design = 0
    for run_id, uri in uris.items():
        packet = store.get(run_id)
        if uri == "github:octo/gone#1":
            assert packet.state is State.BLOCKED, (run_id, packet.state)
            [blocker] = packet.open_blockers
            assert blocker.kind is BlockerKind.DELIVERY_FAILED
            assert "repository not found" in blocker.detail
            blocked_by_design += 1
            continue
        assert packet.state is State.DELIVERED, (run_id, uri, packet.state,
                                                 [b.detail for b in packet.open_blockers])
        if uri == f"slack:{CHANNEL}":
            assert len(s["slack"].messages(run_id)) == 1, run_id
        elif uri.startswith("github:"):
            assert len(s["github"].run_comments(run_id)) == 1, run_id
        elif uri.startswith("github-status:"):
            sha = uri.rpartition("@")[2]
            latest = {x["context"]: x for x in s["github"].statuses[("octo/app", sha)]}
            assert latest["waypost/run"]["state"] == "success"
        elif uri.startswith("file:"):
            assert (tmp_path / uri.removeprefix("file:")).is_file()
    hooked = [r for r, u in uris.items() if u.startswith(s["hook"].url)]
    applied = Counter(s["hook"].applied)
    assert applied == Counter(outbox.final_key(r) for r in hooked)  # each applied once
    mails = Counter(s["smtp"].message_ids())
    mailed = [r for r, u in uris.items() if u.startswith("mailto:")]
    assert set(mails) == {f"<{outbox.final_key(r)}@example.com>" for r in mailed}
    posts = len(s["slack"].hook_posts)
    hooks = sum(1 for u in uris.values() if u.startswith("slack-webhook:"))
    assert posts >= hooks
    return {"blocked_by_design": blocked_by_design,
            "webhook_requests": sum(1 for m, _ in s["hook"].requests if m == "POST"),
            "webhook_applied": len(applied),
            "email_duplicates": sum(n - 1 for n in mails.values()),
            "slack_webhook_duplicates": posts - hooks}
