"""The board's list page in a real browser (Playwright driving Debian's Chromium): "needs
you" on top with the one action each run needs (none for a viewer), filters in the URL, a
phone-width layout without horizontal scrolling, hostile titles shown as text, and no
accessibility violation of serious or critical impact (axe-core, served to the page from
the local npm install that `.ci/run` makes, never from a CDN).

One browser for the module. Screenshots of the board (desktop and phone width, light and
dark) are written to `$WAYPOST_SCREENSHOTS` when set, else to the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import waypost
from tests.acceptance.test_board_browser import CHROMIUM, FLAGS, _require_browser
from tests.board_support import Server
from waypost.store import open_store
from waypost.usecases import tokens

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

AXE = Path(__file__).parents[2] / ".ci" / "node" / "node_modules" / "axe-core" / "axe.min.js"
AXE_PATH = "/__axe.min.js"  # where the page fetches it: its own origin, as its CSP allows
HOSTILE = '<img src=x onerror="window.pwned=1">Fix </td> & "quotes"'
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@dataclass(frozen=True)
class Board:
    server: Server
    browser: Browser
    ready: str  # alice's run, ready for her review, with a hostile title
    other: str  # bob's run, in progress under worker-2
    owner: str  # tokens: alice as owner, worker-1 as worker, alice as viewer
    worker: str
    viewer: str
    shots: Path


def _runs(store: waypost.Store) -> tuple[str, str]:
    ready, _ = waypost.start(store, HOSTILE, actor="alice", owner="alice", target="none:")
    worker = waypost.Run(store, ready.id, actor="worker-1")
    worker.claim()
    worker.heartbeat(note="halfway <b>there</b>", progress=0.4)
    worker.report_evidence(waypost.EvidenceKind.TEST, waypost.Verdict.PASSED, "tests pass")
    worker.ready("done")
    other, _ = waypost.start(store, "Migrate the billing tables", actor="bob", owner="bob",
                             target="none:")
    waypost.Run(store, other.id, actor="worker-2").claim()
    return ready.id, other.id


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    _require_browser()
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("board-list")
    url = f"sqlite:///{tmp / 'store.db'}"
    with open_store(url) as store:
        ready, other = _runs(store)
        secrets = [tokens.issue(store, holder=holder, role=role, run_id=None, ttl=None,
                                by="test")[0]
                   for holder, role in (("alice", "owner"), ("worker-1", "worker"),
                                        ("alice", "viewer"))]
    shots = Path(os.environ.get("WAYPOST_SCREENSHOTS") or tmp / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {shots}")
    server = Server(url, log=tmp / "serve.log").start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                owner, worker, viewer = secrets
                yield Board(server, browser, ready, other, owner, worker, viewer, shots)
            finally:
                browser.close()
    finally:
        server.stop()


def _signed_in(board: Board, token: str, **context: Any) -> Page:
    page = board.browser.new_context(**context).new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{board.server.url}/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{board.server.url}/")
    return page


def test_needs_you_is_on_top_with_the_action_each_reader_may_take(board: Board) -> None:
    from playwright.sync_api import expect

    owner = _signed_in(board, board.owner)
    sections = owner.eval_on_selector_all("main > section", "s => s.map(e => e.id)")
    assert sections[0] == "needs"
    need = owner.locator(f"#need-{board.ready}")
    expect(need).to_have_attribute("data-topic", "ready for review")
    expect(need.locator("a.action")).to_have_text("review the result")
    expect(need.locator("a.action")).to_have_attribute("href", f"/runs/{board.ready}#actions")
    expect(need.locator("code.command")).to_contain_text(f"waypost review {board.ready}")
    expect(owner.locator(f"#need-{board.other}")).to_have_count(0)  # bob's run: not hers
    owner.locator(f"#need-{board.ready} a.action").click()
    expect(owner.locator("#review")).to_be_visible()
    owner.context.close()
    worker = _signed_in(board, board.worker)
    expect(worker.locator("#needs .need")).to_have_count(0)
    expect(worker.locator(f"#run-{board.ready}")).to_be_visible()
    worker.context.close()
    viewer = _signed_in(board, board.viewer)
    expect(viewer.locator("#needs")).to_be_visible()
    expect(viewer.locator("#needs a.action, #needs code.command")).to_have_count(0)
    viewer.context.close()


def test_the_filters_are_the_url(board: Board) -> None:
    from playwright.sync_api import expect

    page = _signed_in(board, board.owner)
    page.select_option("select[name=state]", "in_progress")
    page.click(".filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"[?&]state=in_progress(&|$)"))
    expect(page.locator(f"#run-{board.other}")).to_be_visible()
    expect(page.locator(f"#run-{board.ready}")).to_have_count(0)
    for query, shown, hidden in (("owner=bob", board.other, board.ready),
                                 ("worker=worker-1", board.ready, board.other),
                                 ("q=BILLING", board.other, board.ready)):
        page.goto(f"{board.server.url}/?{query}")
        expect(page.locator(f"#run-{shown}")).to_be_visible()
        expect(page.locator(f"#run-{hidden}")).to_have_count(0)
    # a value the board does not accept: the one error map's answer (422), as a page
    answer = page.goto(f"{board.server.url}/?state=%3Cscript%3E")
    assert answer is not None
    assert answer.status == 422
    expect(page.locator(".error")).to_contain_text("no state is called '<script>'")
    answer = page.goto(f"{board.server.url}/?before=1&before=2")
    assert answer is not None
    assert answer.status == 422
    expect(page.locator(".error")).to_contain_text("given 2 times")
    page.context.close()


def test_a_hostile_title_is_text_and_the_link(board: Board) -> None:
    from playwright.sync_api import expect

    page = _signed_in(board, board.owner)
    link = page.locator(f"#run-{board.ready} td.title a")
    expect(link).to_have_text(HOSTILE)
    expect(link).to_have_attribute("href", f"/runs/{board.ready}")
    expect(page.locator(f"#need-{board.ready} a.title")).to_have_text(HOSTILE)
    expect(page.locator(f"#run-{board.ready} .progress")).to_have_text(
        "40% halfway <b>there</b>")
    expect(page.locator("main img")).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_phone_reads_the_board_without_scrolling_sideways(board: Board, scheme: str) -> None:
    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page = _signed_in(board, board.owner, viewport=size, color_scheme=scheme)
        page.screenshot(path=str(board.shots / f"board-{name}-{scheme}.png"), full_page=True)
        if name == "phone":
            wide, inner = page.evaluate(
                "[document.scrollingElement.scrollWidth, window.innerWidth]")
            assert wide <= inner, f"the page is {wide} px wide on a {inner} px screen"
        page.context.close()
    assert (board.shots / f"board-phone-{scheme}.png").stat().st_size > 0


def _axe_violations(page: Page) -> list[dict[str, Any]]:
    page.add_script_tag(url=AXE_PATH)
    found: list[dict[str, Any]] = page.evaluate(
        "axe.run(document).then(r => r.violations.map(v => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))})))")
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("who", ["owner", "viewer"])
def test_no_serious_accessibility_violation_on_the_board_or_the_run_page(
        board: Board, who: str) -> None:
    if not AXE.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{AXE} is missing (CI=true: .ci/run installs axe-core)")
        pytest.skip("axe-core is not installed: npm install --prefix .ci/node axe-core@4.14.1")
    found = {}
    for scheme in ("light", "dark"):
        page = _signed_in(board, getattr(board, who), color_scheme=scheme)
        page.route(f"**{AXE_PATH}", lambda route: route.fulfill(
            path=str(AXE), content_type="text/javascript"))
        for where in ("/", f"/runs/{board.ready}"):
            page.goto(f"{board.server.url}{where}")
            found[f"{scheme} {where}"] = _axe_violations(page)
        page.context.close()
    assert all(not v for v in found.values()), json.dumps(found, indent=1)
