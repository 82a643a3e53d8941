"""Retry policy, status handling and relay settings: pure, no clock or network."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from waypost.core.targets import Places
from waypost.delivery.policy import (
    Attempt,
    Outcome,
    backoff,
    for_status,
    next_try,
    retry,
    sent,
)
from waypost.delivery.settings import (
    SECRET_ENV,
    DeliverySettings,
    delivery_root,
    load_settings,
    places_at_start,
)
from waypost.delivery.webhook import retry_after
from waypost.errors import InvalidInput

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(("status", "outcome"), [
    (200, Outcome.SENT), (204, Outcome.SENT), (299, Outcome.SENT),
    (302, Outcome.RETRY), (307, Outcome.RETRY), (408, Outcome.RETRY), (425, Outcome.RETRY),
    (429, Outcome.RETRY), (500, Outcome.RETRY), (502, Outcome.RETRY), (503, Outcome.RETRY),
    (301, Outcome.GIVE_UP), (308, Outcome.GIVE_UP),
    (400, Outcome.GIVE_UP), (401, Outcome.GIVE_UP), (404, Outcome.GIVE_UP),
    (410, Outcome.GIVE_UP), (422, Outcome.GIVE_UP),
])
def test_status_handling_follows_standard_webhooks(status: int, outcome: Outcome) -> None:
    assert for_status(status, "Reason").outcome is outcome


def test_410_says_the_receiver_asked_to_stop() -> None:
    assert for_status(410, "Gone").detail == (
        "HTTP 410 Gone: the receiver asked not to be sent this again")


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    assert [backoff(n, base=1, cap=100, rand=lambda: 1.0) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert [backoff(n, base=1, cap=100, rand=lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1, 2]
    assert backoff(40, base=1, cap=60, rand=lambda: 1.0) == 60
    assert backoff(10_000, base=5, cap=3600, rand=lambda: 1.0) == 3600


def test_next_try_respects_retry_after_and_the_horizon() -> None:
    def at(attempt: Attempt, attempts: int) -> datetime | None:
        return next_try(attempt, attempts=attempts, now=NOW, queued_at=NOW, base=1.0,
                        cap=600.0, horizon=60.0, rand=lambda: 1.0)

    assert at(retry("HTTP 500"), 1) == NOW + timedelta(seconds=1)
    assert at(retry("HTTP 429", retry_after=30), 1) == NOW + timedelta(seconds=30)
    assert at(retry("HTTP 500"), 7) is None  # 64 s would pass the 60 s horizon
    assert at(sent("ok"), 1) is None


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("120", NOW) == 120
    assert retry_after("Fri, 02 Jan 2026 03:05:05 GMT", NOW) == 60
    assert retry_after("whenever", NOW) is None
    assert retry_after(None, NOW) is None


def test_settings_from_waypost_toml_then_env_then_flags(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "waypost.toml").write_text(
        '[delivery]\nbackoff_base = "2s"\nhorizon = "1d"\nwebhook_secret = "whsec_dG9t"\n')
    monkeypatch.delenv(SECRET_ENV, raising=False)
    settings = load_settings(tmp_path)
    assert (settings.backoff_base, settings.horizon, settings.webhook_secret) == (
        2.0, 86400.0, "whsec_dG9t")
    monkeypatch.setenv(SECRET_ENV, "whsec_ZW52")
    assert load_settings(tmp_path).webhook_secret == "whsec_ZW52"
    assert load_settings(tmp_path, backoff_base=0.2, timeout=None).backoff_base == 0.2


def test_settings_refuse_unknown_keys_and_zero_waits(tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text('[delivery]\nbackof_base = "2s"\n')
    with pytest.raises(InvalidInput, match=r"unknown key\(s\) in \[delivery\]: backof_base"):
        load_settings(tmp_path)
    with pytest.raises(InvalidInput, match="backoff base must be more than 0"):
        DeliverySettings(backoff_base=0)
    assert DeliverySettings(timeout=10).lease > 10 * 2


def test_concurrency_is_a_bounded_whole_number(tmp_path: Path) -> None:
    assert DeliverySettings().concurrency == 8
    (tmp_path / "waypost.toml").write_text("[delivery]\nconcurrency = 3\n")
    assert load_settings(tmp_path).concurrency == 3
    for wrong in ('"3"', "2.5", "true"):
        (tmp_path / "waypost.toml").write_text(f"[delivery]\nconcurrency = {wrong}\n")
        with pytest.raises(InvalidInput, match="concurrency must be a whole number"):
            load_settings(tmp_path)
    for wrong_count in (0, 65):
        with pytest.raises(InvalidInput, match="concurrency must be 1 to 64"):
            DeliverySettings(concurrency=wrong_count)


def test_allow_paths_are_absolute_from_the_config_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    (tmp_path / "waypost.toml").write_text(
        '[delivery]\nallow_paths = ["/srv/reports/", "~/out", "../shared"]\n')
    assert load_settings(tmp_path).allow_paths == (
        "/srv/reports", "/home/someone/out", str(tmp_path.parent / "shared"))
    assert places_at_start(None, str(tmp_path / "waypost.toml")) == Places(
        root=str(tmp_path), allow=load_settings(tmp_path).allow_paths)
    (tmp_path / "waypost.toml").write_text('[delivery]\nallow_paths = "/srv"\n')
    with pytest.raises(InvalidInput, match="allow_paths must be a list of folders"):
        load_settings(tmp_path)


def test_the_delivery_root_is_beside_dot_waypost_else_the_config_folder(
        tmp_path: Path) -> None:
    store = str(tmp_path / ".waypost" / "waypost.db")
    config = str(tmp_path / "cfg" / "waypost.toml")
    assert delivery_root(store, config) == str(tmp_path)
    assert delivery_root(str(tmp_path / "elsewhere.db"), config) == str(tmp_path / "cfg")
    assert delivery_root(None, None) == os.getcwd()
