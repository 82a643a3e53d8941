"""The emailed link in a real browser (Playwright driving Debian's Chromium): the owner opens
the link from the mail, presses its one button, reviews and approves on the run's page and
signs out; the same link opened again in another browser is refused. No script or policy
error on any page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import waypost
from tests.acceptance.test_board_browser import CHROMIUM, FLAGS, LIVE_MS, _require_browser
from tests.board_support import serving
from tests.delivery_support import fast
from tests.fake_smtp import SmtpServer
from waypost.delivery.relay import Relay
from waypost.model import EvidenceKind, State, Verdict
from waypost.store import open_store

SECRET = "browser-link-secret-" + "7" * 32


def _ready_run(url: str) -> str:
    with open_store(url) as store:
        run, _ = waypost.start(store, "Fix the <flaky> login test", actor="alice",
                               owner="alice", target="none:", notify="mailto:alice@example.com",
                               kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
        worker = waypost.Run(store, run.id, actor="w1")
        worker.claim()
        worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
        worker.ready("fixed", public_summary="The login test no longer flakes.")
    return run.id


def test_the_owner_answers_from_the_mail_in_a_browser(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _require_browser()
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("WAYPOST_LINK_SECRET", SECRET)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = _ready_run(url)
    errors: list[str] = []
    with SmtpServer().running() as smtp, serving(url) as server:
        with open_store(url) as store:
            Relay(store, settings=fast(smtp_url=smtp.url, smtp_from="waypost@relay.example",
                                       board_url=server.url, link_secret=SECRET),
                  relay_id="relay:t").drain()
        body = smtp.received[0].get_payload(decode=True)
        assert isinstance(body, bytes)
        found = re.search(re.escape(server.url) + r"/link/\S+", body.decode())
        assert found
        link = found.group(0)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = browser.new_context().new_page()
                page.set_default_timeout(LIVE_MS)
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("console", lambda msg: errors.append(msg.text)
                        if msg.type == "error" else None)
                page.goto(link)
                expect(page.locator("h1")).to_have_text(
                    f"Sign in to review run {run} as alice")
                page.click("#use-link")
                expect(page.locator("#run-state")).to_have_text("ready_for_review")
                assert page.url == f"{server.url}/runs/{run}"
                page.click("#review")
                expect(page.locator("#approve")).to_be_visible()
                page.click("#approve")
                expect(page.locator("#run-state")).to_have_text("approved")
                page.click("header button[type=submit]")  # sign out
                expect(page.locator("#token")).to_be_visible()
                again = browser.new_context().new_page()
                again.set_default_timeout(LIVE_MS)
                again.goto(link)
                again.click("#use-link")
                expect(again.locator("[role=alert]")).to_contain_text("was already used")
            finally:
                browser.close()
    with open_store(url) as store:
        assert store.get(run).state is State.APPROVED
        [grant] = store.grants()
    assert grant.revoked_at is not None
    assert errors == []
