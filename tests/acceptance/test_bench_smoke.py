"""The benchmarks still run and report in their shape. Nothing here looks at a speed."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest

import waypost
from bench import (
    board,
    bundle,
    cli_verbs,
    delivery,
    durable,
    postgres,
    procs,
    report,
    scan,
    serve_bounds,
    serve_load,
    sweep,
    threads,
)
from bench.harness import NOT_BUILT, NOT_MEASURED, Figure, Section, absent, interleave
from bench.pending import exists
from tests import pg
from waypost.core.history import verify_run
from waypost.store.postgres.store import PostgresStore


def test_interleave_rotates_the_order_and_keeps_samples_by_name() -> None:
    calls: list[str] = []

    def subject(name: str) -> float:
        calls.append(name)
        return float(len(calls))

    samples = interleave({n: functools.partial(subject, n) for n in "abc"}, rounds=3)
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert samples == {"a": [1.0, 6.0, 8.0], "b": [2.0, 4.0, 9.0], "c": [3.0, 5.0, 7.0]}


def test_ratios_pair_the_samples_of_each_round() -> None:
    section = Section(key="k", title="t", unit="ops/s", higher_is_better=True, figures=[
        Figure(name="subject", samples=(2.0, 6.0, 3.0)),
        Figure(name="baseline", samples=(1.0, 2.0, 3.0))])
    ratio = section.add_ratio("subject / baseline", "subject", "baseline")
    assert ratio.per_round == (2.0, 3.0, 1.0)
    assert (ratio.median, ratio.low, ratio.high) == (2.0, 1.0, 3.0)


def test_durable_section_has_every_figure_and_ratio(tmp_path: Path) -> None:
    section = durable.run(tmp_path, rounds=2, batch=2)
    names = [f.name for f in section.figures]
    assert names[:5] == [durable.WAYPOST, durable.FRESH, durable.COMMIT_ONLY, durable.SQL_ONLY,
                         durable.RAW]
    assert durable.FSYNC in names
    assert all(len(f.samples) == 2 and f.low > 0 for f in section.figures)
    labels = {r.label for r in section.ratios}
    assert {durable.VS_RAW, durable.VS_FSYNC, durable.FRESH_VS_REUSED, durable.COMMIT_VS_RAW,
            durable.SQL_VS_RAW} <= labels
    assert (durable.VS_LANGGRAPH in labels) == durable.langgraph_available()
    assert (durable.SQL_VS_LANGGRAPH in labels) == durable.langgraph_available()


def test_the_durable_floor_writes_what_a_heartbeat_writes(tmp_path: Path) -> None:
    """The floor is waypost's own statements: the rows it commits read back as heartbeats
    whose chain and fold verify, one event and one version per heartbeat."""
    with ExitStack() as stack:
        sample = durable.waypost_sql_only(tmp_path, stack)
        assert sample(5) > 0
    with waypost.open_store(str(tmp_path / "sql-only.db")) as store:
        (run_id,) = store.run_ids()
        events = store.events(run_id)
        verify_run(run_id, events, store.get(run_id))
        assert [e.type for e in events[-7:]] == ["heartbeat"] * 7  # 2 warming, 5 sampled
        assert store.get(run_id).version == events[-1].seq


def test_board_fill_makes_runs_that_verify(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    board.fill(path, 40)
    with waypost.open_store(str(path)) as store:
        ids = store.run_ids()
        assert len(ids) == 40
        board.check_copies(path, ids)  # every copy: hash chain and fold
        active = store.list_runs(states=[waypost.State.IN_PROGRESS, waypost.State.BLOCKED])
    assert len(active) == board.active_runs(40)


def test_targets_pass_miss_and_not_built() -> None:
    section = Section(key="cli", title="t", unit="ms", higher_is_better=False, figures=[
        Figure(name="waypost heartbeat RUN", samples=(20.0, 40.0)),
        Figure(name="python -c pass", samples=(10.0, 10.0))])
    section.add_ratio("heartbeat / python -c pass", "waypost heartbeat RUN", "python -c pass")
    pending = Section(key="sweep", title="t", unit="ms", higher_is_better=False,
                      status=NOT_BUILT)
    pending.targets = [absent("sweep target", NOT_BUILT)]
    found = {t.text: t for t in report.targets({"cli": section, "sweep": pending})}
    assert found["`waypost heartbeat` <= 3.0x `python -c pass`"].status == "PASS"  # 3.0x
    assert found["`waypost heartbeat` <= 3.0x `python -c pass`"].detail == "measured 3.00x"
    assert found["sweep target"].status == NOT_BUILT
    text = report.table([section, pending], list(found.values()), "header")
    assert "PASS" in text
    assert NOT_BUILT in text
    section.ratios[0] = dataclasses.replace(section.ratios[0], per_round=(4.5,))
    section.figures.append(Figure(name=procs.FLOOR, samples=(25.0, 25.0)))
    section.add_ratio(cli_verbs.FLOOR_RATIO, procs.FLOOR, "python -c pass")
    found = {t.text: t for t in report.targets({"cli": section})}
    assert found["`waypost heartbeat` <= 3.0x `python -c pass`"].status == "MISS"
    assert found["`waypost heartbeat` <= 3.0x `python -c pass`"].detail \
        == "measured 4.50x; the dependency floor (msgspec, sqlite3): 2.50x"
    assert found["durable transition >= 0.75x raw sqlite3 insert+upsert"].status \
        == NOT_MEASURED


def test_the_durable_targets_name_their_floor_beside_the_measure() -> None:
    section = Section(key="durable", title="t", unit="ops/s", higher_is_better=True, figures=[
        Figure(name=durable.WAYPOST, samples=(60.0,)), Figure(name=durable.RAW, samples=(100.0,)),
        Figure(name=durable.SQL_ONLY, samples=(90.0,))])
    section.add_ratio(durable.VS_RAW, durable.WAYPOST, durable.RAW)
    section.add_ratio(durable.SQL_VS_RAW, durable.SQL_ONLY, durable.RAW)
    found = {t.text: t for t in report.targets({"durable": section})}
    target = found["durable transition >= 0.75x raw sqlite3 insert+upsert"]
    assert (target.status, target.detail) == (
        "MISS", "measured 0.60x; the floor, waypost's SQL alone: 0.90x")


def test_delivery_section_measures_the_relay_its_floor_and_both_bare_posts(
        tmp_path: Path) -> None:
    section = delivery.run(tmp_path, rounds=1, batch=3)  # exits when a delivery is not made
    names = [f.name for f in section.figures]
    assert names == [delivery.RELAY, delivery.NO_SEND, delivery.NEW_CONNECTION,
                     delivery.KEPT_ALIVE]
    assert all(len(f.samples) == 1 and f.low > 0 for f in section.figures)
    (floor,) = [r for r in section.ratios if "the floor" in r.label]
    (target,) = section.targets
    assert target.detail.endswith(f"; the floor, the relay without its send: "
                                  f"{floor.median:.2f}x")


def test_serve_section_measures_both_servers_and_memory(tmp_path: Path) -> None:
    section = serve_load.run(tmp_path, rounds=1, seconds=0.3, stored=50, sweeps=200)
    names = [f.name for f in section.figures]
    assert names == [serve_load.GROUPED, serve_load.UNGROUPED, serve_load.UNFLUSHED,
                     serve_load.ONE_WRITER]
    assert all(len(f.samples) == 1 and f.low > 0 for f in section.figures)
    assert {serve_load.GAIN, serve_load.CEILING} <= {r.label for r in section.ratios}
    ceiling = section.ratio(serve_load.CEILING).median
    assert section.targets[0].detail.endswith(f"the ceiling, no flush at all: {ceiling:.2f}x")
    assert section.counts["errors"] == 0
    assert [t.text for t in section.targets] == list(serve_load.TARGETS)
    rss = section.counts["server peak RSS, MB, group commit"]
    assert 10 < rss < 10_000  # a resident set in MB, read from the server's own process
    assert section.counts["watch RSS, MB, after sweep 200"] > 10
    # skipped, its targets are still named, as not measured
    found = {t.text: t.status for t in report.targets({})}
    assert all(found[text] == NOT_MEASURED for text in serve_load.TARGETS)


def test_the_serve_ceiling_opens_its_stores_unflushed(tmp_path: Path) -> None:
    """The ceiling's server differs from the others in one thing: its store's commits
    are not flushed (synchronous=OFF); stores opened anywhere else stay FULL."""
    probe = ("from waypost.store.sqlite.store import SqliteStore\n"
             f"store = SqliteStore({str(tmp_path / 's.db')!r})\n"
             "print(store.pragmas()['synchronous'])\n")
    said = [subprocess.run([sys.executable, "-c", prefix + probe], capture_output=True,
                           text=True, check=True).stdout.strip()
            for prefix in (serve_load.UNFLUSHED_STORES, "")]
    assert said == ["0", "full"]


def test_threads_section_measures_grouping_and_postgresql_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_BENCH_POSTGRES_URL", pg.require_postgres())
    section = threads.run(tmp_path, rounds=1, seconds=0.2)
    assert [f.name for f in section.figures] == [threads.ONE, threads.MANY, threads.UNGROUPED,
                                                 threads.UNFLUSHED, threads.PG_ONE,
                                                 threads.PG_MANY]
    assert all(len(f.samples) == 1 and f.low > 0 for f in section.figures)
    assert [r.label for r in section.ratios] == [threads.GAIN, threads.OVER_UNGROUPED,
                                                 threads.CEILING, threads.PG_GAIN]
    ceiling = section.ratio(threads.CEILING).median
    assert section.targets[0].detail.endswith(f"the ceiling, no flush at all: {ceiling:.2f}x")
    assert section.counts["errors"] == 0
    with psycopg.connect(postgres.server_url()) as conn:  # its schema is dropped
        left = conn.execute("SELECT count(*) FROM pg_namespace"
                            " WHERE nspname LIKE 'waypost_bench_threads_%'").fetchone()
    assert left == (0,)


def test_threads_section_says_why_postgresql_is_not_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:1/test")
    section = threads.run(tmp_path, rounds=1, seconds=0.1)
    assert [f.name for f in section.figures] == [threads.ONE, threads.MANY, threads.UNGROUPED,
                                                 threads.UNFLUSHED]
    assert threads.PG_GAIN not in {r.label for r in section.ratios}
    assert any(n.startswith("PostgreSQL not measured: PostgreSQL unreachable")
               for n in section.notes)


def test_a_missing_module_is_reported_as_missing() -> None:
    assert exists("waypost.model")
    assert not exists("waypost.no_such_feature")


def test_the_postgres_sweep_store_sweeps_what_it_made_due_and_drops_its_schema(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_BENCH_POSTGRES_URL", pg.require_postgres())
    with ExitStack() as stack:
        swept = sweep.PostgresSweptStore(stored=12, due=4, stack=stack)
        assert (swept.recorded, swept.examined) == (4, 4)  # the warm-up sweep
        assert swept.sweep_once() > 0
        assert (swept.recorded, swept.examined) == (4, 4)  # the first four are blocked now
        assert isinstance(swept.store, PostgresStore)
        schema = swept.store.schema
        assert len(swept.store.run_ids()) == 12 + 4
    with psycopg.connect(postgres.server_url()) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchone()
    assert left == (0,)


def test_the_raw_floor_writes_each_due_run_once_and_keeps_out_of_the_sweeps_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "BATCH", 2)  # the floor's pages: 2, 2, 1
    with ExitStack() as stack:
        swept = sweep.SweptStore(tmp_path / "s.db", stored=40, due=5, stack=stack)
        floor = sweep.RawFloor(swept, stack)
        before = swept.store.run_ids()
        assert floor.sweep_once() > 0
        assert (floor.recorded, floor.examined) == (5, 5)
        written = [swept.store.load(i).head_hash for i in swept.store.run_ids()
                   if i not in before]
        assert written == ["0" * 64] * 5  # the floor's rows: written by it, not by a sweep
        assert swept.sweep_once() > 0
        assert (swept.recorded, swept.examined) == (5, 5)  # only its own fresh due runs


def test_scan_section_reports_each_subject_at_each_size(tmp_path: Path) -> None:
    sizes = (2_000, 4_000)
    section = scan.run(tmp_path, rounds=2, sizes=sizes)
    assert [f.name for f in section.figures] == [
        scan.label(subject, size) for size in sizes for subject in (scan.SCAN, scan.GATE)]
    assert all(len(f.samples) == 2 and f.low > 0 for f in section.figures)
    assert [r.label for r in section.ratios] == [f"{s}: {scan.RATIO}"
                                                 for s in (scan.SCAN, scan.GATE)]
    assert [t.status in {"PASS", "MISS"} for t in section.targets] == [True, True]
    assert "private identifier(s) in 1 artifact(s)" in section.notes[0]  # the gate ran


def test_adversarial_text_has_the_size_asked_and_every_unit() -> None:
    text = scan.adversarial(100_000)
    assert len(text) == 100_000
    assert all(unit * 3 in text for unit in scan.UNITS)


def test_bounds_section_measures_the_shipped_server_beside_an_unbounded_one(
        tmp_path: Path) -> None:
    section = serve_bounds.run(tmp_path, rounds=1, seconds=0.3)
    assert [f.name for f in section.figures] == [serve_bounds.BOUNDED, serve_bounds.UNBOUNDED]
    assert all(len(f.samples) == 1 and f.low > 0 for f in section.figures)
    assert [r.label for r in section.ratios] == [serve_bounds.RATIO]
    assert section.counts["errors"] == 0
    # the baseline differs in its protocol alone: uvicorn's own, with no deadline
    probe = ("from waypost.system.deadlines import Limits, protocol\n"
             "print(protocol(Limits()).__name__)\n")
    prefix = serve_bounds.UNBOUNDED_SERVE.partition("from waypost.cli")[0]
    said = [subprocess.run([sys.executable, "-c", head + probe], capture_output=True,
                           text=True, check=True).stdout.strip() for head in ("", prefix)]
    assert said == ["Held", "H11Protocol"]


def test_waiters_section_measures_writers_with_and_without_a_thousand_waits(
        tmp_path: Path) -> None:
    from bench import waiters

    section = waiters.run(tmp_path, rounds=2, seconds=0.3)
    assert [f.name for f in section.figures] == ["4 writers, nobody waiting",
                                                 "4 writers, 1,000 waiters"]
    assert [r.label for r in section.ratios] == [waiters.RATIO]
    assert [t.text for t in section.targets] == [waiters.TARGET]
    assert "2000 waits woken" in " ".join(section.notes)


def test_bundle_section_measures_export_and_verify_beside_their_floors(tmp_path: Path) -> None:
    section = bundle.run(tmp_path, rounds=2, events=60, blob_mb=2, fold_sizes=(50, 100))
    assert [f.name for f in section.figures] == [bundle.EXPORT, bundle.TAR_FLOOR,
                                                 bundle.VERIFY, bundle.HASH_FLOOR,
                                                 bundle.STORE_VERIFY]
    assert all(len(f.samples) == 2 and f.low > 0 for f in section.figures)
    assert len(section.ratios) == 3
    assert section.counts["events"] == 60
    assert [t.status in {"PASS", "MISS"} for t in section.targets] == [True]
