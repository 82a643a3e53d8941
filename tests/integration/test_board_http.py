"""The board over real HTTP: the token cookie (HttpOnly, SameSite=Strict), cross-site posts
refused, the owner's buttons for the owner alone, the open board on loopback only, and
artifacts downloaded as attachments. A refused post changes nothing in the store."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import waypost
from tests import pg
from tests.board_support import Server, serving
from waypost.store import open_store
from waypost.usecases import tokens


@dataclass
class Board:
    server: Server
    store_url: str
    run: str
    owner: str  # alice's owner token (alice owns the run)
    other_owner: str  # bob's owner token (bob owns nothing here)
    viewer: str

    @contextmanager
    def client(self, secret: str | None = None) -> Iterator[httpx.Client]:
        """A browser-like client, signed in through the form when given a token."""
        with httpx.Client(base_url=self.server.url, timeout=20,
                          follow_redirects=False) as client:
            if secret is not None:
                signed = client.post("/login", data={"token": secret},
                                     headers={"Origin": self.server.url})
                assert signed.status_code == 303, signed.text
            yield client

    def state(self) -> str:
        with open_store(self.store_url) as store:
            return str(store.get(self.run).state)

    def version(self) -> int:
        with open_store(self.store_url) as store:
            return store.get(self.run).version


def _ready_run(store_url: str, tmp_path: Path) -> str:
    with open_store(store_url) as store:
        run, _ = waypost.start(store, "Fix <the> login test", actor="alice", owner="alice",
                               target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600,
                               gates=[waypost.Gate(name="report", check="artifact:report.md")])
        worker = waypost.Run(store, run.id, actor="worker-1")
        worker.claim()
        report = tmp_path / "report.md"
        report.write_text("# Report\n\nThe race is fixed: the session comes first.\n")
        worker.add_artifact(str(report), role=waypost.ArtifactRole.REPORT, max_bytes=1 << 20)
        worker.check("artifact:report.md")
        worker.ready("fixed", public_summary="The login test no longer flakes.",
                     artifacts=["report.md"])
        return run.id


@pytest.fixture(params=["sqlite", "postgres"])
def board(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Board]:
    with contextlib.ExitStack() as stack:
        url = (stack.enter_context(pg.fresh_schema()) if request.param == "postgres"
               else f"sqlite:///{tmp_path / 'store.db'}")
        yield stack.enter_context(_board(url, tmp_path))


@contextmanager
def _board(url: str, tmp_path: Path) -> Iterator[Board]:
    run = _ready_run(url, tmp_path)
    with open_store(url) as store:
        secrets = [tokens.issue(store, holder=h, role=r, run_id=None, ttl=None, by="test")[0]
                   for h, r in (("alice", "owner"), ("bob", "owner"), ("vic", "viewer"))]
    with serving(url) as server:
        yield Board(server, url, run, *secrets)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def test_signing_in_sets_an_httponly_samesite_strict_cookie(board: Board) -> None:
    with board.client() as client:
        assert client.get("/").headers["location"] == "/login"
        response = client.post("/login", data={"token": board.viewer},
                               headers={"Origin": board.server.url})
        assert response.status_code == 303
        cookie = response.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        page = client.get("/")
        assert page.status_code == 200
        assert board.run in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        wrong = client.post("/login", data={"token": "wpt_0_nope"},
                            headers={"Origin": board.server.url})
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers


def test_a_revoked_token_is_sent_back_to_sign_in(board: Board) -> None:
    with board.client(board.viewer) as client:
        assert client.get("/").status_code == 200
        with open_store(board.store_url) as store:
            grant = tokens.authenticate(store, board.viewer)
            tokens.revoke(store, grant.id)
        page = client.get("/")
        assert page.status_code == 401
        assert 'action="/login"' in page.text
        assert 'max-age=0' in page.headers["set-cookie"].lower()


def test_the_owner_sees_the_buttons_and_a_viewer_or_another_owner_does_not(
        board: Board) -> None:
    with board.client(board.owner) as owner:
        page = owner.get(f"/runs/{board.run}").text
    for button in ("review", "approve", "changes", "cancel"):
        assert f'id="{button}"' in page
    for secret in (board.viewer, board.other_owner):
        with board.client(secret) as client:
            page = client.get(f"/runs/{board.run}").text
        assert "The login test no longer flakes." in page
        assert 'id="approve"' not in page
        assert "<form method=\"post\" action=\"/runs/" not in page


def test_cross_site_and_tokenless_posts_are_refused_and_change_nothing(board: Board) -> None:
    before = board.version()
    with board.client(board.owner) as owner:
        csrf = _csrf(owner.get(f"/runs/{board.run}").text)
        own = {"Origin": board.server.url}
        refusals = [
            owner.post(f"/runs/{board.run}/cancel", data={"reason": "x"}, headers=own),
            owner.post(f"/runs/{board.run}/cancel", data={"reason": "x", "csrf": "0" * 64},
                       headers=own),
            owner.post(f"/runs/{board.run}/cancel", data={"reason": "x", "csrf": csrf},
                       headers={"Origin": "https://evil.example"}),
            owner.post(f"/runs/{board.run}/cancel", data={"reason": "x", "csrf": csrf},
                       headers={"Origin": "null"}),
        ]
    with board.client(board.viewer) as viewer:
        viewer_csrf = _csrf(viewer.get("/").text)
        refusals.append(viewer.post(f"/runs/{board.run}/approve",
                                    data={"csrf": viewer_csrf}, headers=own))
    with board.client() as anonymous:
        refusals.append(anonymous.post(f"/runs/{board.run}/cancel",
                                       data={"reason": "x", "csrf": csrf}, headers=own))
    assert [r.status_code for r in refusals] == [403, 403, 403, 403, 403, 303]
    assert refusals[-1].headers["location"] == "/login"
    assert board.version() == before
    assert board.state() == "ready_for_review"


def test_the_owner_reviews_and_approves_with_a_waiver_from_the_page(board: Board) -> None:
    with board.client(board.owner) as owner:
        own = {"Origin": board.server.url}
        csrf = _csrf(owner.get(f"/runs/{board.run}").text)
        reviewed = owner.post(f"/runs/{board.run}/review", data={"csrf": csrf}, headers=own)
        assert reviewed.status_code == 303, reviewed.text
        page = owner.get(f"/runs/{board.run}").text
        assert "rechecked" in page
        approved = owner.post(f"/runs/{board.run}/approve",
                              data={"csrf": csrf, "gate": "report", "reason": "checked by hand",
                                    "reviewed": _digest(page)}, headers=own)
        assert approved.status_code == 303, approved.text
    assert board.state() == "approved"
    with open_store(board.store_url) as store:
        approval = store.get(board.run).approval
    assert approval is not None
    assert [(w.gate, w.reason) for w in approval.waivers] == [("report", "checked by hand")]


def _digest(page: str) -> str:
    """The reviewed-result digest the page's answer forms carry (each the same)."""
    carried: set[str] = set(re.findall(r'<input type="hidden" name="reviewed" value="([^"]*)">',
                                       page))
    assert len(carried) == 1, carried
    [digest] = carried
    assert f'<dd id="reviewed"><code>{digest}</code></dd>' in page  # shown, as carried
    return digest


def test_an_answer_from_a_page_shown_before_the_result_changed_is_refused(
        board: Board) -> None:
    """The page's forms carry the digest of the result it showed: once a review changes
    the result, an answer from the old page is refused saying what changed; the page as it
    is now answers it."""
    with board.client(board.owner) as owner:
        own = {"Origin": board.server.url}
        page = owner.get(f"/runs/{board.run}").text
        csrf, old = _csrf(page), _digest(page)
        assert owner.post(f"/runs/{board.run}/review", data={"csrf": csrf},
                          headers=own).status_code == 303
        before = board.version()
        for action, fields in (("approve", {}), ("changes", {"reason": "not yet"})):
            refused = owner.post(f"/runs/{board.run}/{action}",
                                 data={"csrf": csrf, "reviewed": old, **fields}, headers=own)
            assert refused.status_code == 409
            assert "result_changed" in refused.text
            assert "alice ran a review" in refused.text
        missing = owner.post(f"/runs/{board.run}/changes",
                             data={"csrf": csrf, "reason": "not yet"}, headers=own)
        assert missing.status_code == 422
        assert board.version() == before
        now = _digest(owner.get(f"/runs/{board.run}").text)
        assert now != old
        sent_back = owner.post(f"/runs/{board.run}/changes",
                               data={"csrf": csrf, "reviewed": now, "reason": "one more test"},
                               headers=own)
        assert sent_back.status_code == 303, sent_back.text
    assert board.state() == "in_progress"


def test_a_refused_action_shows_the_page_with_the_reason(board: Board) -> None:
    with board.client(board.owner) as owner:
        own = {"Origin": board.server.url}
        csrf = _csrf(owner.get(f"/runs/{board.run}").text)
        response = owner.post(f"/runs/{board.run}/changes", data={"csrf": csrf, "reason": ""},
                              headers=own)
    assert response.status_code == 422
    assert 'role="alert"' in response.text
    assert board.state() == "ready_for_review"


def test_an_artifact_downloads_as_an_attachment(board: Board) -> None:
    with board.client(board.owner) as owner:
        page = owner.get(f"/runs/{board.run}").text
        link = re.search(r'href="(/runs/[^"]+/artifacts/[^"]+)"', page)
        assert link is not None
        response = owner.get(link.group(1))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.content.startswith(b"# Report")
    with board.client(board.viewer) as viewer:  # README: a viewer gets no artifact bytes
        page = viewer.get(f"/runs/{board.run}").text
        assert "report.md" in page
        assert re.search(r'href="/runs/[^"]+/artifacts/', page) is None
        refused = viewer.get(link.group(1))
    assert refused.status_code == 403
    assert b"# Report" not in refused.content


def test_the_open_board_needs_no_token_on_loopback_and_offers_no_action(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = _ready_run(url, tmp_path)
    with serving(url, "--open") as server:
        page = httpx.get(f"{server.url}/runs/{run}", timeout=20)
        assert page.status_code == 200
        assert "open board" in page.text
        assert 'id="approve"' not in page.text
        events = httpx.get(f"{server.url}/", timeout=20)
        assert events.status_code == 200
    with serving(url) as server:
        assert httpx.get(f"{server.url}/", timeout=20).status_code == 303


def test_the_board_routes_are_written_as_litestar_3_expects(tmp_path: Path) -> None:
    """Built here, under -W error: an inferred dependency or parameter would warn."""
    from waypost.http.app import create_app
    from waypost.http.settings import ServerConfig

    app = create_app(ServerConfig(store_url=str(tmp_path / "store.db")))
    paths = {route.path for route in app.routes}
    assert {"/", "/runs/{run_id:str}", "/events", "/login"} <= paths


def test_the_cookie_is_secure_when_the_request_came_as_https(board: Board) -> None:
    with board.client() as client:
        response = client.post("/login", data={"token": board.viewer}, headers={
            "Origin": f"https://127.0.0.1:{board.server.port}", "X-Forwarded-Proto": "https"})
    assert response.status_code == 303
    assert "secure" in response.headers["set-cookie"].lower()


def test_a_runs_token_sees_that_run_alone(board: Board) -> None:
    with open_store(board.store_url) as store:
        other, _ = waypost.start(store, "someone else's", actor="alice", owner="alice",
                                 target="none:")
        secret, _ = tokens.issue(store, holder="worker-1", role="worker", run_id=board.run,
                                 ttl=None, by="test")
    with board.client(secret) as client:
        page = client.get("/").text
        assert board.run in page
        assert other.id not in page
        assert client.get(f"/runs/{other.id}").status_code == 403


def test_signing_in_returns_to_the_page_asked_for_and_nowhere_else(board: Board) -> None:
    with board.client() as client:
        asked = client.get(f"/runs/{board.run}")
        assert asked.headers["location"] == f"/login?next=/runs/{board.run}"
        form = client.get(asked.headers["location"]).text
        assert f'name="next" value="/runs/{board.run}"' in form
        own = {"Origin": board.server.url}
        back = client.post("/login", data={"token": board.viewer, "next": f"/runs/{board.run}"},
                           headers=own)
        assert back.headers["location"] == f"/runs/{board.run}"
        for elsewhere in ("https://evil.example/", "//evil.example", "/runs/../x", "/schema"):
            away = client.post("/login", data={"token": board.viewer, "next": elsewhere},
                               headers=own)
            assert away.headers["location"] == "/"


def test_signing_out_forgets_the_token(board: Board) -> None:
    with board.client(board.viewer) as client:
        assert client.get("/").status_code == 200
        out = client.post("/logout", headers={"Origin": board.server.url})
        assert out.status_code == 303
        assert "max-age=0" in out.headers["set-cookie"].lower()
        assert client.get("/").headers["location"] == "/login"
        elsewhere = client.post("/logout", headers={"Origin": "https://evil.example"})
        assert elsewhere.status_code == 403
