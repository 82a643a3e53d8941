"""The owner answers from the mail: a real `waypost serve`, a real SMTP server and the relay.
The ready-for-review mail carries a signed link; opening it shows one button (a GET uses
nothing), pressing it signs the owner in to that run alone, and the owner approves on the
run's page behind the board's CSRF rules; the relay then delivers the result. Used twice,
used late, changed, used on another run's page, or used by another browser after sign-out:
each is refused with a page saying why, and the store keeps nothing of it."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

import waypost
from tests import pg
from tests.board_support import Server, serving
from tests.delivery_support import fast
from tests.fake_smtp import SmtpServer
from tests.helpers import FakeClock
from waypost.delivery.relay import Relay
from waypost.durations import utcnow
from waypost.model import EvidenceKind, Grant, Kind, State, Verdict
from waypost.store import open_store

SECRET = "link-secret-" + "9" * 40
SENDER = "waypost@relay.example"
TO = "alice@example.com"


@dataclass
class World:
    store_url: str
    server: Server
    smtp: SmtpServer

    def relay(self, clock: FakeClock | None = None) -> None:
        settings = fast(smtp_url=self.smtp.url, smtp_from=SENDER, timeout=5.0,
                        board_url=self.server.url, link_secret=SECRET)
        with open_store(self.store_url) as store:
            Relay(store, settings=settings, relay_id="relay:t", clock=clock or utcnow,
                  rand=lambda: 1.0).drain()

    def ready_run(self, *, at: datetime | None = None, title: str = "Fix the login test",
                  notify: str = f"mailto:{TO}") -> str:
        """A run ready for review, its notice mailed (queued at `at`: now by default)."""
        clock = FakeClock(at or utcnow())
        with open_store(self.store_url) as store:
            run, _ = waypost.start(store, title, actor="alice", owner="alice",
                                   target=f"mailto:{TO}", notify=notify,
                                   kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
            worker = waypost.Run(store, run.id, actor="w1", clock=clock)
            worker.claim()
            worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
            worker.ready("fixed", public_summary="The login test no longer flakes.")
        self.relay(clock)
        return run.id

    def link_of(self, run: str) -> str:
        """The link in the ready-for-review mail about `run`: its path on the server."""
        for message in self.smtp.received:
            body = message.get_payload(decode=True)
            assert isinstance(body, bytes)
            text = body.decode()
            if f"run {run} is ready for review" in text:
                found = re.search(re.escape(self.server.url) + r"(/link/[A-Za-z0-9_.-]+)", text)
                assert found, text
                return found.group(1)
        raise AssertionError(f"no ready-for-review mail about {run}")

    def grants(self) -> list[Grant]:
        with open_store(self.store_url) as store:
            return store.grants()

    def state(self, run: str) -> State:
        with open_store(self.store_url) as store:
            return store.get(run).state

    @contextmanager
    def browser(self) -> Iterator[httpx.Client]:
        with httpx.Client(base_url=self.server.url, timeout=20,
                          follow_redirects=False) as client:
            yield client

    @property
    def own(self) -> dict[str, str]:
        return {"Origin": self.server.url}


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("WAYPOST_LINK_SECRET", SECRET)  # the server's, as `serve` reads it
    with contextlib.ExitStack() as stack:
        url = (stack.enter_context(pg.fresh_schema()) if request.param == "postgres"
               else f"sqlite:///{tmp_path / 'store.db'}")
        with open_store(url):
            pass  # made before the server opens it
        smtp = stack.enter_context(SmtpServer().running())
        server = stack.enter_context(serving(url))
        yield World(url, server, smtp)


def _form(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the page's form posting to `action` (what a browser sends)."""
    found = re.search(r'<form method="post" action="' + re.escape(action) + r'">(.*?)</form>',
                      page, re.S)
    assert found, f"the page has no form to {action}"
    return {name: html.unescape(value) for name, value in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(1))}


def _sign_in(world: World, browser: httpx.Client, link: str) -> httpx.Response:
    page = browser.get(link)
    assert page.status_code == 200, page.text
    assert f'action="{link}"' in page.text
    return browser.post(link, headers=world.own)


def test_the_owner_signs_in_from_the_mail_approves_and_the_result_is_delivered(
        world: World) -> None:
    run = world.ready_run()
    link = world.link_of(run)
    with world.browser() as scanner:  # a mail scanner fetches the link first: nothing used
        for _ in range(2):
            shown = scanner.get(link)
            assert shown.status_code == 200
            assert f"Sign in to review run {run} as alice" in shown.text
    assert world.grants() == []
    with world.browser() as owner:
        signed = _sign_in(world, owner, link)
        assert signed.status_code == 303, signed.text
        assert signed.headers["location"] == f"/runs/{run}"
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        [grant] = world.grants()
        assert (grant.holder, grant.role, grant.run_id) == ("alice", "owner", run)
        page = owner.get(f"/runs/{run}").text
        assert "alice (owner, run " in page
        reviewed = owner.post(f"/runs/{run}/review", headers=world.own,
                              data=_form(page, f"/runs/{run}/review"))
        assert reviewed.status_code == 303, reviewed.text
        page = owner.get(f"/runs/{run}").text
        approved = owner.post(f"/runs/{run}/approve", headers=world.own,
                              data=_form(page, f"/runs/{run}/approve"))
        assert approved.status_code == 303, approved.text
    assert world.state(run) is State.APPROVED
    world.relay()
    assert world.state(run) is State.DELIVERED
    finals = [m for m in world.smtp.received if m["Message-ID"].startswith(f"<{run}.final@")]
    assert len(finals) == 1


def test_a_link_used_twice_is_refused_and_stores_nothing(world: World) -> None:
    run = world.ready_run()
    link = world.link_of(run)
    with world.browser() as first:
        assert _sign_in(world, first, link).status_code == 303
    before = world.grants()
    with world.browser() as second:
        again = second.post(link, headers=world.own)
        assert again.status_code == 409
        assert "was already used" in again.text
        assert "set-cookie" not in again.headers
        assert second.get(f"/runs/{run}").headers["location"].startswith("/login")
    assert world.grants() == before


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)  # both stores: conformance
def test_a_late_link_is_refused(world: World) -> None:
    run = world.ready_run(at=utcnow() - timedelta(days=8))  # links last seven days
    link = world.link_of(run)
    with world.browser() as owner:
        shown = owner.get(link)
        assert shown.status_code == 403
        assert "expired at" in shown.text
        assert 'action="/link/' not in shown.text
        used = owner.post(link, headers=world.own)
        assert used.status_code == 403
        assert "expired at" in used.text
        assert "set-cookie" not in used.headers
    assert world.grants() == []
    assert world.state(run) is State.READY_FOR_REVIEW


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)  # both stores: conformance
def test_a_changed_link_is_refused(world: World) -> None:
    run = world.ready_run()
    link = world.link_of(run)
    version, payload, signature = link.removeprefix("/link/").split(".")
    for changed in (f"/link/{version}.{payload}.{signature[::-1]}",
                    f"/link/{version}.{payload[:-4]}.{signature}", f"/link/{link[-60:]}"):
        with world.browser() as someone:
            assert someone.get(changed).status_code == 403
            refused = someone.post(changed, headers=world.own)
            assert refused.status_code == 403
            assert "not one this server signed" in refused.text
    with world.browser() as elsewhere:  # a post from another site's page
        assert elsewhere.post(link, headers={"Origin": "https://evil.example"}).status_code == 403
    assert world.grants() == []


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)  # both stores: conformance
def test_a_link_session_acts_on_its_own_run_alone(world: World) -> None:
    run = world.ready_run()
    other = world.ready_run(title="Another run of alice's")
    with world.browser() as owner:
        assert _sign_in(world, owner, world.link_of(run)).status_code == 303
        board = owner.get("/").text
        assert run in board
        assert other not in board
        assert owner.get(f"/runs/{other}").status_code == 403
        csrf = _form(owner.get(f"/runs/{run}").text, f"/runs/{run}/cancel")["csrf"]
        for action in ("cancel", "approve", "review"):
            refused = owner.post(f"/runs/{other}/{action}", headers=world.own,
                                 data={"csrf": csrf, "reason": "not yours"})
            assert refused.status_code == 403, (action, refused.text)
        # the other run's own link, opened in this browser, is for that run alone in turn
        assert _sign_in(world, owner, world.link_of(other)).headers["location"] == \
            f"/runs/{other}"
        assert owner.get(f"/runs/{run}").status_code == 403
    assert world.state(other) is State.READY_FOR_REVIEW
    assert world.state(run) is State.READY_FOR_REVIEW


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)  # both stores: conformance
def test_signing_out_ends_the_session_in_every_browser(world: World) -> None:
    run = world.ready_run()
    link = world.link_of(run)
    with world.browser() as owner, world.browser() as copied:
        assert _sign_in(world, owner, link).status_code == 303
        copied.cookies.set("waypost_token", owner.cookies["waypost_token"])
        assert copied.get(f"/runs/{run}").status_code == 200
        out = owner.post("/logout", headers=world.own)
        assert out.status_code == 303
        assert "max-age=0" in out.headers["set-cookie"].lower()
        page = copied.get(f"/runs/{run}")
        assert page.status_code == 401
        assert "revoked" in page.text
        again = copied.post(link, headers=world.own)
        assert again.status_code == 409
    [grant] = world.grants()
    assert grant.revoked_at is not None
    assert world.state(run) is State.READY_FOR_REVIEW


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)  # both stores: conformance
def test_a_server_without_the_secret_takes_no_link(world: World,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    run = world.ready_run()
    link = world.link_of(run)
    monkeypatch.delenv("WAYPOST_LINK_SECRET")
    with serving(world.store_url) as bare, httpx.Client(base_url=bare.url, timeout=20) as c:
        refused = c.post(link, headers={"Origin": bare.url})
        assert refused.status_code == 403
        assert "WAYPOST_LINK_SECRET is not set" in refused.text
    assert world.grants() == []
