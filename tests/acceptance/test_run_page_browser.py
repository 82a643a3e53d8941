"""The run page in a real browser (Playwright driving Debian's Chromium): an evidence log
expanded and shown as text, hostile Markdown previewed inert, an image shown, the history
told in sentences, the owner resolving a blocker by typing the missing input, and a stale
page's approve refused with the digest binding's own message. Reading needs no script.

One browser for the module. Screenshots (desktop and phone width) go to the folder named by
WAYPOST_SCREENSHOTS, else to a tmp dir (the path is printed).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import waypost
from tests.acceptance.test_board_browser import CHROMIUM, FLAGS, _require_browser
from tests.board_support import Server
from waypost import errors
from waypost.model import ArtifactRole, BlockerKind
from waypost.store import open_store
from waypost.usecases import tokens

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

WAIT_MS = 20_000
LOG = "printf '<script>alert(1)</script>\\n\\033[31mRED\\033[0m done\\n'"
HOSTILE_MD = ("# Findings\n\n[click me](javascript:alert(1)), [run it](javascript:void0) and "
              "[the docs](https://example.com/d)\n\n<img src=x onerror=alert(2)> "
              "<script>alert(3)</script>\n\n"
              "![tracker](https://evil.example/p.png)\n\n- **fixed** the race\n")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@dataclass(frozen=True)
class Scene:
    server: Server
    store_url: str
    ready: str  # ready for review, with evidence, artifacts and an image
    blocked: str  # blocked on the owner's missing input
    owner_token: str
    viewer_token: str
    shots: Path


def _runs(store_url: str) -> tuple[str, str, str, str]:
    with open_store(store_url) as store:
        run, _ = waypost.start(store, "Fix the <flaky> login test", actor="alice",
                               owner="alice", target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600, heartbeat_interval=600)
        worker = waypost.Run(store, run.id, actor="worker-1")
        worker.claim()
        worker.heartbeat(note="halfway through the flaky cases", progress=0.5)
        worker.record_command(["sh", "-c", LOG])
        for text in ("# Findings\n\nThe race is somewhere in the session setup.\n",
                     HOSTILE_MD):
            worker.add_artifact_bytes("findings.md", [text.encode()], role=ArtifactRole.REPORT,
                                      max_bytes=1 << 20)
        worker.add_artifact_bytes("chart.png", [PNG], role=ArtifactRole.OTHER,
                                  max_bytes=1 << 20, media_type="image/png")
        worker.ready("fixed", public_summary="The login test no longer flakes.",
                     artifacts=["findings.md"])
        other, _ = waypost.start(store, "Deploy to staging", actor="alice", owner="alice",
                                 target="none:")
        second = waypost.Run(store, other.id, actor="worker-1")
        second.claim()
        second.block(BlockerKind.MISSING_INPUT, "which staging region?")
        owner_token, _ = tokens.issue(store, holder="alice", role="owner", run_id=None,
                                      ttl=None, by="test")
        viewer_token, _ = tokens.issue(store, holder="vic", role="viewer", run_id=None,
                                       ttl=None, by="test")
    return run.id, other.id, owner_token, viewer_token


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    _require_browser()
    tmp = tmp_path_factory.mktemp("run-page")
    url = f"sqlite:///{tmp / 'store.db'}"
    ready, blocked, owner_token, viewer_token = _runs(url)
    shots = Path(os.environ.get("WAYPOST_SCREENSHOTS") or tmp / "screenshots")
    print(f"\nscreenshots: {shots}")
    server = Server(url, log=tmp / "serve.log").start()
    try:
        yield Scene(server=server, store_url=url, ready=ready, blocked=blocked,
                    owner_token=owner_token, viewer_token=viewer_token, shots=shots)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(scene: Scene) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def _owner_page(browser: Browser, scene: Scene, *, script: bool = True,
                token: str | None = None, **options: Any) -> Page:
    context = browser.new_context(java_script_enabled=script, **options)
    context.add_cookies([{"name": "waypost_token", "value": token or scene.owner_token,
                          "url": scene.server.url}])
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def test_the_evidence_log_opens_without_script_and_shows_as_text(browser: Browser,
                                                                 scene: Scene) -> None:
    from playwright.sync_api import expect

    page = _owner_page(browser, scene, script=False)
    page.goto(f"{scene.server.url}/runs/{scene.ready}")
    item = page.locator("ul.evidence details").first
    expect(item.locator(".badge")).to_have_text("ran here")
    expect(item.locator("pre.output")).not_to_be_visible()
    item.locator("summary").click()
    output = item.locator("pre.output")
    expect(output).to_contain_text("<script>alert(1)</script>")
    expect(output).to_contain_text("\\x1b[31mRED")  # the escape shown, not obeyed
    assert page.locator("ul.evidence script").count() == 0
    expect(page.locator("ol.timeline")).to_contain_text(
        "worker-1 checked in at 50%: halfway through the flaky cases")
    page.click("a.log")
    assert page.locator("script").count() == 0
    assert "<script>alert(1)</script>" in page.inner_text("body")
    assert "\x1b" not in page.content()
    log_url = page.url
    page.context.close()

    viewer = _owner_page(browser, scene, script=False, token=scene.viewer_token)
    viewer.goto(f"{scene.server.url}/runs/{scene.ready}")  # the public view: no output, log
    expect(viewer.locator("ul.evidence .badge")).to_have_text("ran here")
    assert viewer.locator("pre.output, a.log, details.preview").count() == 0
    refused = viewer.goto(log_url)
    assert refused is not None
    assert refused.status == 403
    expect(viewer.locator("body")).not_to_contain_text("RED")
    viewer.context.close()


def test_hostile_markdown_is_previewed_inert_and_the_image_shows(browser: Browser,
                                                                 scene: Scene) -> None:
    from playwright.sync_api import expect

    page = _owner_page(browser, scene)
    dialogs: list[str] = []

    def dismissed(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismissed)
    page.goto(f"{scene.server.url}/runs/{scene.ready}")
    preview = page.locator("details.preview-markdown .markdown")
    expect(preview.locator("h3")).to_have_text("Findings")
    expect(preview.locator("strong")).to_have_text("fixed")
    expect(preview).to_contain_text("<img src=x onerror=alert(2)> <script>alert(3)</script>")
    hrefs = preview.locator("a").evaluate_all("links => links.map(a => [a.href, a.rel])")
    assert hrefs == [["https://example.com/d", "noopener noreferrer nofollow"]]
    assert preview.locator("img, script").count() == 0
    expect(preview).to_contain_text("![tracker](https://evil.example/p.png)")
    diff = page.locator("details.preview-markdown pre.diff")
    expect(diff).to_contain_text("-The race is somewhere in the session setup.")
    image = page.locator("details.preview-image img")
    image.scroll_into_view_if_needed()
    expect(image).to_have_js_property("naturalWidth", 1)
    assert dialogs == []
    scene.shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(scene.shots / "run-desktop.png"), full_page=True)
    page.context.close()
    phone = _owner_page(browser, scene, viewport={"width": 390, "height": 844},
                        is_mobile=True)
    phone.goto(f"{scene.server.url}/runs/{scene.ready}")
    phone.screenshot(path=str(scene.shots / "run-phone.png"), full_page=True)
    phone.context.close()


def test_the_owner_types_the_missing_input_and_a_stale_approve_is_refused(
        browser: Browser, scene: Scene) -> None:
    from playwright.sync_api import expect

    page = _owner_page(browser, scene, script=False)  # a page left open, not refreshed
    page.goto(f"{scene.server.url}/runs/{scene.blocked}")
    page.fill("form[action$='/unblock'] input[name=resolution]", "eu-west-1")
    page.click("button.unblock")
    expect(page.locator("#run-state")).to_have_text("in_progress")
    expect(page.locator("ol.timeline")).to_contain_text("alice resolved")
    expect(page.locator("ol.timeline")).to_contain_text("eu-west-1")

    page.goto(f"{scene.server.url}/runs/{scene.ready}")
    stale = page.locator("#reviewed").inner_text()
    with open_store(scene.store_url) as store:
        waypost.Run(store, scene.ready, actor="alice").review()  # a new review: a new digest
        with pytest.raises(errors.ResultChanged) as refused:
            waypost.Run(store, scene.ready, actor="alice").approve(reviewed=stale)
    page.click("#approve")
    alert = page.locator("p.error")
    expect(alert).to_contain_text("result_changed")
    assert " ".join(refused.value.message.split()) in " ".join(alert.inner_text().split())
    with open_store(scene.store_url) as store:
        assert str(store.get(scene.ready).state) == "ready_for_review"
    page.context.close()
