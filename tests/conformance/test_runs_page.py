"""Pages of runs newest first by id: each costs its own rows, and walking them while runs
change meets every run exactly once, on every backend."""

from __future__ import annotations

from waypost.model import BlockerKind, State
from waypost.store import Store
from waypost.usecases.runs import Run
from waypost.usecases.starting import start


def _walk(store: Store, limit: int, before: str | None = None,
          **filters: object) -> list[str]:
    """Every page from `before` on, bounded: a page that fails to move on fails the test."""
    seen: list[str] = []
    for _ in range(100):
        page = store.runs_page(before=before, limit=limit, **filters)  # type: ignore[arg-type]
        assert len(page) <= limit
        if not page:
            return seen
        seen += [p.id for p in page]
        before = page[-1].id
    raise AssertionError("the pages never ended")


def test_pages_meet_every_run_once_newest_first_while_runs_change(store: Store) -> None:
    ids = [start(store, f"r{i}", actor="alice" if i % 2 else "bob", target="none:")[0].id
           for i in range(11)]
    first = store.runs_page(before=None, limit=4)
    Run(store, ids[0], actor="w").claim()  # the oldest changes while the pages are read
    seen = [p.id for p in first] + _walk(store, 4, first[-1].id)
    assert seen == sorted(ids, reverse=True)
    Run(store, ids[3], actor="w").claim()
    Run(store, ids[3], actor="w").block(BlockerKind.MISSING_INPUT, "which port?")
    assert _walk(store, 3, states=[State.BLOCKED]) == [ids[3]]
    assert _walk(store, 2, owner="alice") == sorted(ids[1::2], reverse=True)
    assert _walk(store, 5, states=[State.BLOCKED], owner="bob") == []

