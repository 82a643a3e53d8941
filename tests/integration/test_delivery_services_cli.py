"""The service targets through the CLI: `start` warns of a missing credential, `doctor`
reports it, `deliver --once` blocks the run naming it, and `show` (text and --json) says
how strong the receipt's "once" was."""

from __future__ import annotations

import json

import pytest

from tests.delivery_support import approved_run
from tests.fake_services import FakeSlack
from tests.helpers import Cli, FakeClock
from waypost.store import open_store

CREDENTIALS = ("SLACK_BOT_TOKEN", "GITHUB_TOKEN", "WAYPOST_SMTP_URL", "WAYPOST_SMTP_FROM",
               "WAYPOST_SLACK_API", "GITHUB_API_URL")


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)


def test_a_missing_token_is_warned_at_start_reported_by_doctor_and_blocks_delivery(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("init")
    started = cli("start", "Ship it", "--target", "github:octo/app#7", "--kind", "bounded",
                  "--json")
    assert started.code == 0, started.err
    assert "warning: target github:octo/app#7: GITHUB_TOKEN is not set" in started.err
    run_id = started.json()["run"]
    assert started.json()["warnings"] == [started.err.strip().removeprefix("warning: ")]
    doctor = cli("doctor", "--json")
    [found] = [c for c in doctor.json()["checks"] if c["name"] == "credentials"]
    assert found["status"] == "warn"
    assert "GITHUB_TOKEN is not set" in found["detail"]
    assert run_id in found["detail"]
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_set_now")
    quiet = cli("start", "Ship another", "--target", "github:octo/app#8", "--kind", "bounded")
    assert quiet.code == 0
    assert "warning" not in quiet.err


def test_deliver_once_blocks_on_a_missing_token_and_show_names_it(
        cli: Cli, clock: FakeClock) -> None:
    cli.ok("init")
    with open_store(str(cli.store)) as store:
        run_id = approved_run(store, clock, target="slack:C0WAYPOST1")
    outcome = cli("deliver", "--once")
    assert outcome.code == 3
    shown = cli.ok("show", run_id)
    assert "delivery_failed" in shown
    assert "SLACK_BOT_TOKEN is not set" in shown


def test_show_says_the_receipts_assurance(cli: Cli, clock: FakeClock,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("init")
    with FakeSlack("xoxb-cli", channels=("C0WAYPOST1",)).running() as slack:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-cli")
        monkeypatch.setenv("WAYPOST_SLACK_API", slack.url)
        with open_store(str(cli.store)) as store:
            run_id = approved_run(store, clock, target="slack:C0WAYPOST1")
        assert cli("deliver", "--once").code == 0
    text = cli.ok("show", run_id)
    assert "assurance upsert: found and updated in place, never posted twice" in text
    assert "[upsert]" in text  # the outbox row
    packet = json.loads(cli.ok("show", run_id, "--json"))
    assert packet["receipt"]["assurance"] == "upsert"
    [row] = packet["observed"]["deliveries"]
    assert json.loads(row["receipt"])["assurance"] == "upsert"
    assert "xoxb-cli" not in text
