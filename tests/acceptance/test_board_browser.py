"""The board in a real browser (Playwright driving Debian's Chromium; Playwright's own
browser download is never used): it watches a run move in_progress → blocked →
ready_for_review while the CLI changes it from another process, reconnects after the
server restarts and shows what changed meanwhile, downloads an artifact, and the owner
approves from the run page; a viewer sees no button.

One browser launch for the whole test. Screenshots land in the test's tmp dir, under
`screenshots/` (the path is printed; pytest keeps the last three runs' tmp dirs).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import waypost
from tests.board_support import Server
from waypost.store import open_store
from waypost.usecases import tokens

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
LIVE_MS = 20_000  # how long the page may take to show a change


def _require_browser() -> None:
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[dev]')"
    if missing is None and not os.access(CHROMIUM, os.X_OK):
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (CI=true: the browser test must run)")
        pytest.skip(missing)


class Cli:
    """`waypost` in a process of its own, as the people around a run would type it."""

    def __init__(self, store_url: str, cwd: Path) -> None:
        self.env = {**os.environ, "WAYPOST_URL": store_url}
        self.cwd = cwd

    def __call__(self, *args: str, actor: str) -> str:
        done = subprocess.run([sys.executable, "-m", "waypost", *args, "--as", actor],
                              env=self.env, cwd=self.cwd, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, f"waypost {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()


@dataclass(frozen=True)
class Scene:
    run: str
    owner_token: str
    viewer_token: str
    store_url: str
    tmp: Path
    shots: Path


def _scene(tmp_path: Path) -> Scene:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        run, _ = waypost.start(store, "Fix the <flaky> login test", actor="alice",
                               owner="alice", target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600, heartbeat_interval=600,
                               gates=[waypost.Gate(name="report", check="artifact:report.md")])
        owner_token, _ = tokens.issue(store, holder="alice", role="owner", run_id=None,
                                      ttl=None, by="test")
        viewer_token, _ = tokens.issue(store, holder="vic", role="viewer", run_id=None,
                                       ttl=None, by="test")
    (tmp_path / "report.md").write_text("# Report\n\nThe race is fixed: the session first.\n")
    return Scene(run=run.id, owner_token=owner_token, viewer_token=viewer_token,
                 store_url=url, tmp=tmp_path, shots=tmp_path / "screenshots")


def _the_restart(text: str, url: str) -> bool:
    """What the server's restart makes the browser say: its stream cut, a refused reconnect."""
    return url.partition("?")[0].endswith("/events") or "ERR_CONNECTION_REFUSED" in text


def _watch_for_errors(page: Page, errors: list[str]) -> Page:
    """Script errors and console errors (a CSP violation is one) end up in `errors`."""
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda msg: errors.append(f"console: {msg.text} at {msg.location}")
            if msg.type == "error" and not _the_restart(msg.text, msg.location["url"])
            else None)
    return page


def _sign_in(page: Page, server: Server, token: str, where: str = "/") -> None:
    page.set_default_timeout(LIVE_MS)
    page.goto(f"{server.url}{where}")
    page.fill("#token", token)
    page.click("button[type=submit]")


def _watch_it_move(page: Page, scene: Scene, cli: Cli) -> None:
    """The CLI moves the run from another process; the open board follows, no reload."""
    from playwright.sync_api import expect

    row = page.locator(f"#run-{scene.run}")
    expect(row).to_have_attribute("data-state", "in_progress")
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "live")
    page.screenshot(path=str(scene.shots / "1-in-progress.png"), full_page=True)
    blocker = cli("block", scene.run, "--kind", "missing_input", "--detail",
                  "staging key <missing>", actor="worker-1")
    expect(row).to_have_attribute("data-state", "blocked")
    expect(row.locator(".blockers")).to_contain_text("staging key <missing>")
    page.screenshot(path=str(scene.shots / "2-blocked.png"), full_page=True)
    cli("unblock", scene.run, blocker, "--resolution", "key added", actor="alice")
    cli("artifact", "add", scene.run, "report.md", "--role", "report", actor="worker-1")
    cli("evidence", "check", scene.run, "artifact:report.md", actor="worker-1")
    cli("ready", scene.run, "--summary", "fixed", "--public-summary",
        "The login test no longer flakes.", "--artifact", "report.md", actor="worker-1")
    expect(row).to_have_attribute("data-state", "ready_for_review")
    page.screenshot(path=str(scene.shots / "3-ready.png"), full_page=True)


def _restart_meanwhile(page: Page, scene: Scene, cli: Cli, server: Server) -> str:
    """A run started while the server was down shows once the stream has resumed."""
    from playwright.sync_api import expect

    server.stop()
    expect(page.locator("#stream-status")).not_to_have_attribute("data-state", "live")
    missed = cli("start", "Started while the board was away", "--owner", "alice",
                 "--target", "none:", actor="alice")
    server.start()
    expect(page.locator(f"#run-{missed}")).to_be_visible()
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "live")
    page.screenshot(path=str(scene.shots / "4-after-restart.png"), full_page=True)
    return missed


def _download_review_approve(page: Page, scene: Scene) -> None:
    from playwright.sync_api import expect

    page.click(f"#run-{scene.run} a")
    expect(page.locator("#run-state")).to_have_text("ready_for_review")
    expect(page.locator("pre.summary")).to_have_text("The login test no longer flakes.")
    with page.expect_download() as downloading:
        page.click("a.download")
    saved = scene.tmp / "downloaded-report.md"
    downloading.value.save_as(saved)
    assert saved.read_bytes() == (scene.tmp / "report.md").read_bytes()
    page.click("#review")
    expect(page.locator("table.gates")).to_contain_text("passed")
    page.screenshot(path=str(scene.shots / "5-reviewed.png"), full_page=True)
    page.click("#approve")
    expect(page.locator("#run-state")).to_have_text("approved")
    expect(page.locator("#approve")).to_have_count(0)
    page.screenshot(path=str(scene.shots / "6-approved.png"), full_page=True)


def _viewer_sees_no_button(page: Page, scene: Scene, server: Server, run: str) -> None:
    from playwright.sync_api import expect

    _sign_in(page, server, scene.viewer_token, f"/runs/{run}")  # back to the run's page
    expect(page.locator("#run-state")).to_have_text("in_progress")
    for button in ("#review", "#approve", "#changes", "#cancel"):
        expect(page.locator(button)).to_have_count(0)
    expect(page.locator("form[action^='/runs/']")).to_have_count(0)
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "live")
    page.screenshot(path=str(scene.shots / "7-viewer.png"), full_page=True)


def test_the_board_follows_a_run_live_and_the_owner_approves_it(tmp_path: Path) -> None:
    _require_browser()
    from playwright.sync_api import sync_playwright

    scene = _scene(tmp_path)
    print(f"\nscreenshots: {scene.shots}")
    cli = Cli(scene.store_url, tmp_path)
    cli("claim", scene.run, actor="worker-1")
    server = Server(scene.store_url, log=tmp_path / "serve.log").start()
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                owner = _watch_for_errors(
                    browser.new_context(accept_downloads=True).new_page(), errors)
                _sign_in(owner, server, scene.owner_token)
                _watch_it_move(owner, scene, cli)
                missed = _restart_meanwhile(owner, scene, cli, server)
                _download_review_approve(owner, scene)
                _viewer_sees_no_button(
                    _watch_for_errors(browser.new_context().new_page(), errors), scene,
                    server, missed)
            finally:
                browser.close()
    finally:
        server.stop()
    with open_store(scene.store_url) as store:
        assert str(store.get(scene.run).state) == "approved"
    assert len(list(scene.shots.glob("*.png"))) == 7
    assert errors == []
