"""The board's pages as functions of their view models, without a server: hostile stored
strings come out escaped, the owner's buttons appear only where the rules would allow the
action, and every column reads the observed view."""

from __future__ import annotations

import contextlib
import html
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import waypost
from tests import pg
from tests.http_support import issue, serving
from waypost.durations import utcnow
from waypost.errors import InvalidInput
from waypost.http import board_views
from waypost.http.board_render import render
from waypost.model import BlockerKind, EvidenceKind, Verdict
from waypost.store import Store, open_store
from waypost.usecases.views import observe_run, observe_runs

BOARD = {"needs": (), "filters": board_views.Filters(), "states": board_views.STATE_ORDER,
         "older": ""}
HOSTILE = ('<script>alert(1)</script>"\'&<img src=x onerror=alert(2)>'
           "\u202edlrow\x1b]52;c;AAAA\x07 {{ 7*7 }} {% raw %}")


def _store(tmp_path: Path) -> Store:
    return open_store(str(tmp_path / "board.db"))


def _hostile_run(store: Store, tmp_path: Path) -> str:
    run, _ = waypost.start(store, HOSTILE, actor="alice", owner="alice", target="none:",
                           kind=waypost.Kind.LONG_RUNNING, max_silence=60,
                           gates=[waypost.Gate(name="report", check="artifact:r.md")])
    worker = waypost.Run(store, run.id, actor="worker-1")
    worker.claim()
    worker.heartbeat(note=HOSTILE, progress=0.5)
    worker.block(BlockerKind.OTHER, HOSTILE)
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, HOSTILE)
    (tmp_path / "r.md").write_text(f"# Report\n\n{HOSTILE} and some words to be substantive\n")
    worker.add_artifact(str(tmp_path / "r.md"), role=waypost.ArtifactRole.REPORT,
                        max_bytes=1 << 20)
    return run.id


def _page(store: Store, run_id: str, actions: set[str]) -> str:
    now = utcnow()
    packet = observe_run(store, store.get(run_id), now)
    view = board_views.run_page(packet, store.events(run_id), now, actions=actions)
    return render("run.html", page=view, cursor=7, run_id=run_id, visitor="v", csrf="c",
                  error=None)


def _assert_inert(page: str) -> None:
    """No markup of the hostile text survives: it shows only as escaped text."""
    assert "<script>alert" not in page
    assert "<img src=x" not in page
    assert "\u202e" not in page
    assert "\x1b" not in page
    assert "\x07" not in page
    assert "49" not in re.sub(r"[0-9a-f]{12,}|wp_\w+|\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", "", page)
    assert html.escape("<script>alert(1)</script>") in page
    assert "\\u202e" in page  # the bidi override shown as text, not obeyed


def test_hostile_strings_render_escaped_on_the_board_and_the_run_page(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        run_id = _hostile_run(store, tmp_path)
        now = utcnow()
        groups = board_views.board(observe_runs(store, store.list_runs(), now), now)
        need = board_views.Need(run_id=run_id, title=HOSTILE, topic="blocked", detail=HOSTILE,
                                at="now", action="resolve the blocker",
                                href=f"/runs/{run_id}#actions", command=HOSTILE)
        board = render("board.html", groups=groups, cursor=3, run_id="", visitor=HOSTILE,
                       csrf="", error={"code": "x", "message": HOSTILE, "hint": HOSTILE},
                       **{**BOARD, "needs": (need,)})
        _assert_inert(board)
        _assert_inert(_page(store, run_id, {"cancel"}))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(min_size=1, max_size=60).filter(lambda t: t.strip() == t and t.strip()))
def test_any_title_is_text_never_markup(text: str) -> None:
    """Whatever a title holds, the page holds no tag or attribute the title did not escape."""
    row = board_views.Row(id="wp_x", title=board_views.cut(text, 120), state="blocked",
                          kind="long_running", owner="o", worker="w", liveness="fresh",
                          quiet="", watch="unwatched", watch_detail="", blockers=(text,),
                          delivery="-", delivery_detail="", age="1s", updated="1s ago")
    page = render("board.html", groups=(board_views.Group(state="blocked", rows=(row,)),),
                  cursor=1, run_id="", visitor="", csrf="", error=None, **BOARD)
    cell = page.split('<a href="/runs/wp_x">', 1)[1].split("</a>", 1)[0]
    assert "<" not in cell
    assert ">" not in cell
    assert html.unescape(cell) == board_views.cut(text, 120)


def test_the_viewer_sees_no_button_and_the_owner_sees_those_the_state_offers(
        tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        run_id = _hostile_run(store, tmp_path)
        viewer = _page(store, run_id, set())
        assert "<form method=\"post\" action=\"/runs/" not in viewer
        assert 'id="approve"' not in viewer
        assert 'id="cancel"' not in viewer
        every = {"review", "approve", "changes", "cancel"}
        blocked = _page(store, run_id, every)
        assert 'id="cancel"' in blocked
        assert 'id="approve"' not in blocked
        owner = waypost.Run(store, run_id, actor="alice")
        owner.unblock(store.get(run_id).open_blockers[0].id, "done")
        waypost.Run(store, run_id, actor="worker-1").ready("done", artifacts=["r.md"])
        ready = _page(store, run_id, every)
        for button in ("review", "approve", "changes", "cancel"):
            assert f'id="{button}"' in ready
        assert 'name="csrf" value="c"' in ready
        assert 'name="gate" value="report"' in ready  # unreviewed: approving needs a waiver


def test_a_row_reads_liveness_watch_blockers_delivery_and_age_from_the_observed_view(
        tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        run_id = _hostile_run(store, tmp_path)
        now = utcnow() + timedelta(seconds=90)  # past max_silence (60 s): silent
        packet = observe_run(store, store.get(run_id), now)
        row = board_views.row(packet, now)
        assert packet.observed is not None
        assert row.liveness == "silent" == packet.observed.liveness
        assert row.watch == "unwatched"
        assert row.blockers
        assert row.blockers[0].startswith("other: <script>")
        assert row.delivery == "none"  # target none:
        assert row.age == "1m30s"


@pytest.mark.parametrize("state_moves", [0, 1])
def test_groups_follow_the_order_work_moves(tmp_path: Path, state_moves: int) -> None:
    with _store(tmp_path) as store:
        first = _hostile_run(store, tmp_path)
        if state_moves:
            waypost.Run(store, first, actor="alice").cancel("no longer needed")
        _hostile_run(store, tmp_path)
        now = utcnow()
        groups = board_views.board(observe_runs(store, store.list_runs(), now), now)
        states = [g.state for g in groups]
        assert states == (["blocked", "cancelled"] if state_moves else ["blocked"])


def test_a_delivered_runs_page_says_how_strong_once_was(tmp_path: Path) -> None:
    """The receipt's assurance reaches the board, as it does `show`."""
    from tests.delivery_support import approved_run, fast
    from tests.helpers import FakeClock
    from waypost.delivery.relay import Relay

    clock = FakeClock()
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        run_id = approved_run(store, clock, target="file:result.md")
        Relay(store, settings=fast(), relay_id="relay:t", clock=clock,
              rand=lambda: 1.0).drain()
        assert store.get(run_id).state.value == "delivered"
        page = _page(store, run_id, set())
    assert "assurance idempotent" in page


def test_the_filters_are_decided_before_the_store_is_read() -> None:
    chosen = board_views.filters({"owner": ["bob"], "q": [" login "], "state": [""]})
    assert (chosen.owner, chosen.q, chosen.state) == ("bob", "login", "")
    assert chosen.query(before="wp_abc") == "?owner=bob&q=login&before=wp_abc"
    for bad in ({"state": ["nope"]}, {"owner": ["x" * 201]}, {"q": ["a\x1b[31mb"]},
                {"before": ["'; drop"]}, {"owner": ["a", "b"]}):
        with pytest.raises(InvalidInput):
            board_views.filters(bad)


def test_the_board_pages_by_the_url_and_keeps_its_filters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`older runs` leads to the next page, which shows no run twice and keeps the filter."""
    from waypost.http import auth, board

    monkeypatch.setattr(board, "PAGE", 2)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        started = [waypost.start(store, f"run {i}", actor="alice", owner="alice",
                                 target="none:")[0].id for i in range(3)]
        waypost.start(store, "bob's", actor="bob", owner="bob", target="none:")
    secret = issue(url, "alice", "owner")
    seen: list[str] = []
    with serving(url) as base, httpx.Client(base_url=base,
                                            cookies={auth.COOKIE: secret}) as client:
        page = "/?owner=alice"
        for _ in range(3):
            answer = client.get(page)
            assert answer.status_code == 200
            seen += re.findall(r'<tr id="run-(wp_[0-9a-z]+)"', answer.text)
            older = re.search(r'<a rel="next" href="([^"]+)"', answer.text)
            if older is None:
                break
            page = html.unescape(older.group(1))
            assert "owner=alice" in page
    assert seen == sorted(started, reverse=True)  # newest id first (ids made within one
    # millisecond sort by their random part)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_window_of_events_is_the_stretch_of_the_whole_history(backend: str,
                                                                 tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        url = (stack.enter_context(pg.fresh_schema()) if backend == "postgres"
               else str(tmp_path / "board.db"))
        store = stack.enter_context(open_store(url))
        run, _ = waypost.start(store, "Long", actor="alice", owner="alice", target="none:")
        worker = waypost.Run(store, run.id, actor="worker-1")
        worker.claim()
        for i in range(30):
            worker.heartbeat(note=f"step {i}")
        worker.block(BlockerKind.OTHER, "the staging server refuses connections")
        whole = store.events(run.id)
        assert store.events_window(run.id, limit=5) == whole[-5:]
        assert store.events_window(run.id, before=10, limit=4) == whole[5:9]
        assert store.events_window(run.id, before=3, limit=100) == whole[:2]
        assert store.events_window(run.id, limit=9, types=("blocker_opened", "claimed")) == [
            e for e in whole if e.type in ("blocker_opened", "claimed")]
        assert store.events_window("wp_unknown", limit=5) == []


def test_the_run_page_shows_the_latest_events_and_pages_back_by_cursor(tmp_path: Path) -> None:
    """A long history renders its latest events as sentences, with a "show earlier" link
    whose cursor pages back to the rest."""
    with _store(tmp_path) as store:
        run, _ = waypost.start(store, "Long", actor="alice", owner="alice", target="none:")
        worker = waypost.Run(store, run.id, actor="worker-1")
        worker.claim()
        for i in range(board_views.TIMELINE_EVENTS + 50):
            worker.heartbeat(note=f"step {i}")
        events, now = store.events(run.id), utcnow()
        packet = observe_run(store, store.get(run.id), now)
        latest = board_views.run_page(packet, events, now)
    assert len(latest.timeline) == board_views.TIMELINE_EVENTS
    assert latest.timeline[-1].said == f"worker-1 checked in: step {len(events) - 3}"
    assert latest.earlier == latest.timeline[0].seq
    page = render("run.html", page=latest, cursor=1, run_id=run.id, visitor="v", csrf="c",
                  error=None)
    assert f'href="/runs/{run.id}?before={latest.earlier}">show earlier' in page
    rest = board_views.run_page(packet, events, now, before=latest.earlier)
    assert [m.seq for m in rest.timeline] == list(range(1, latest.earlier))
    assert rest.timeline[0].said.startswith("alice started “Long” for alice")
    assert rest.earlier is None
