"""The `with waypost.run(...)` block and its async twin: started and claimed on entry,
heartbeaten while the block runs, and never left silently `in_progress`: a result packet,
or a named blocker (the exception's traceback, or "left without a result packet")."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import waypost
from waypost.inputs import TEXT_LIMITS
from waypost.sdk.block import Worker, failure_detail
from waypost.store import open_store

Body = Callable[[Worker], object]
FLAVOURS = ["sync", "async"]


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return str(tmp_path / "sdk.db")


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Every test ends with no heartbeat thread alive (nor any other it started)."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before]
    assert left == [], left


def in_block(flavour: str, store_url: str, body: Body, **options: Any) -> str:
    """Run `body` inside `waypost.run` (or `waypost.arun`); return the run's id."""
    options = {"owner": "alice", "target": "none:", "max_silence": 600, "actor": "w1",
               "store": store_url, "heartbeat_every": 0.05, **options}
    seen: list[str] = []
    if flavour == "sync":
        try:
            with waypost.run("import orders", **options) as run:
                seen.append(run.id)
                body(run)
        finally:
            assert heartbeat_threads() == []  # stopped by the time the block is left
        return seen[0]

    async def main() -> None:
        try:
            async with waypost.arun("import orders", **options) as run:
                seen.append(run.id)
                body(run.sync)
        finally:
            assert heartbeat_threads() == []

    asyncio.run(main())
    assert seen, "the block was never entered"
    return seen[0]


def heartbeat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("waypost heartbeats")]


def packet_of(store_url: str, run_id: str) -> waypost.Packet:
    with open_store(store_url) as store:
        return store.get(run_id)


def event_types(store_url: str, run_id: str) -> list[str]:
    with open_store(store_url) as store:
        return [e.type for e in store.events(run_id)]


def last_run_id(store_url: str) -> str:
    with open_store(store_url) as store:
        (run_id,) = store.run_ids()  # each test makes one run
        return run_id


def submit(run: Worker) -> None:
    run.evidence([sys.executable, "-c", "print('412 orders')"], kind="test")
    run.ready("all orders imported", public="orders imported")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_ready_leaves_it_ready_for_review(flavour: str, store_url: str) -> None:
    run_id = in_block(flavour, store_url, submit)
    packet = packet_of(store_url, run_id)
    assert packet.state is waypost.State.READY_FOR_REVIEW
    assert packet.blockers == ()
    assert packet.worker is not None
    assert packet.worker.actor == "w1"


def raise_deep(run: Worker) -> None:
    run.note("parsing page 5", progress=0.4)
    parse_page("page 5")


def parse_page(page: str) -> None:
    raise ValueError(f"bad row 17 on {page}")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_exception_blocks_it_with_the_traceback(flavour: str, store_url: str) -> None:
    with pytest.raises(ValueError, match="bad row 17"):
        in_block(flavour, store_url, raise_deep)
    packet = packet_of(store_url, last_run_id(store_url))
    assert packet.state is waypost.State.BLOCKED
    (blocker,) = packet.open_blockers
    assert blocker.kind is waypost.BlockerKind.FAILED_COMMAND
    assert "ValueError: bad row 17 on page 5" in blocker.detail
    assert "in parse_page" in blocker.detail  # where it was raised: the traceback's end
    assert packet.progress.note == "parsing page 5"


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_blocks_it_and_goes_on(flavour: str, stop: type[BaseException],
                                            store_url: str) -> None:
    def interrupted(run: Worker) -> None:
        raise stop()

    with pytest.raises(stop):
        in_block(flavour, store_url, interrupted)
    packet = packet_of(store_url, last_run_id(store_url))
    assert packet.state is waypost.State.BLOCKED
    assert stop.__name__ in packet.open_blockers[0].detail


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_leaving_without_a_result_is_a_named_blocker(flavour: str, store_url: str) -> None:
    run_id = in_block(flavour, store_url, lambda run: run.note("half done", progress=0.5))
    packet = packet_of(store_url, run_id)
    assert packet.state is waypost.State.BLOCKED
    (blocker,) = packet.open_blockers
    assert "left without a result packet" in blocker.detail


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_heartbeats_arrive_while_the_block_runs(flavour: str, store_url: str) -> None:
    def busy(run: Worker) -> None:
        time.sleep(0.4)
        run.ready("done", public="done") if run.packet.evidence else submit(run)

    run_id = in_block(flavour, store_url, busy)
    types = event_types(store_url, run_id)
    while_running = types[types.index("claimed"):types.index("evidence_recorded")]
    assert while_running.count("heartbeat") >= 3
    assert types[-1] == "marked_ready"  # no beat after the result packet


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_refused_heartbeat_is_raised_when_the_block_ends(flavour: str,
                                                           store_url: str) -> None:
    def taken_over(run: Worker) -> None:
        with open_store(store_url) as store:
            waypost.Run(store, run.id, actor="alice").claim()  # the owner takes it over
        time.sleep(0.3)

    with pytest.raises(waypost.StaleLease, match="alice took the lease over"):
        in_block(flavour, store_url, taken_over)
    packet = packet_of(store_url, last_run_id(store_url))
    assert packet.worker is not None
    assert packet.worker.actor == "alice"
    assert packet.state is waypost.State.IN_PROGRESS  # the new holder's: nothing recorded


def test_a_refused_heartbeat_is_noted_on_the_blocks_own_exception(store_url: str) -> None:
    def taken_over_then_fails(run: Worker) -> None:
        with open_store(store_url) as store:
            waypost.Run(store, run.id, actor="alice").claim()
        time.sleep(0.3)
        raise RuntimeError("gave up")

    with pytest.raises(RuntimeError, match="gave up") as caught:
        in_block("sync", store_url, taken_over_then_fails)
    notes = "\n".join(caught.value.__notes__)
    assert "heartbeats" in notes
    assert "could not record" in notes


def test_the_same_key_resumes_the_run_and_clears_what_the_last_block_left(
        store_url: str) -> None:
    with pytest.raises(ValueError, match="bad row 17"):
        in_block("sync", store_url, raise_deep, idempotency_key="orders-0102")
    run_id = in_block("sync", store_url, submit, idempotency_key="orders-0102")
    assert run_id == last_run_id(store_url)
    packet = packet_of(store_url, run_id)
    assert packet.state is waypost.State.READY_FOR_REVIEW
    assert packet.worker is not None
    assert packet.worker.epoch == 2
    assert packet.blockers[0].resolution == "resumed by a new waypost.run block"


def test_the_store_and_actor_come_from_the_environment(store_url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_URL", store_url)
    monkeypatch.setenv("WAYPOST_ACTOR", "env-worker")
    with waypost.run("from the env", target="none:", max_silence=600) as run:
        submit(run)
    packet = packet_of(store_url, last_run_id(store_url))
    assert packet.worker is not None
    assert packet.worker.actor == "env-worker"
    assert packet.owner == "env-worker"


def test_the_async_verbs_are_awaited(store_url: str, tmp_path: Path) -> None:
    report = tmp_path / "orders.md"
    report.write_text("# Orders\n\nAll 412 orders from last night are imported.\n")

    async def main() -> str:
        async with waypost.arun("async orders", owner="alice", target="none:",
                                max_silence=600, actor="w1", store=store_url) as run:
            await run.note("importing", progress=0.5)
            evidence = await run.evidence([sys.executable, "-c", "pass"], kind="test")
            assert evidence.verdict is waypost.Verdict.PASSED
            await run.artifact(str(report), role="report")
            await run.ready("imported", artifacts=["orders.md"])
            return run.id

    run_id = asyncio.run(main())
    assert packet_of(store_url, run_id).state is waypost.State.READY_FOR_REVIEW


def test_bytes_the_program_made_are_recorded_without_a_file(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 64\n")
    monkeypatch.chdir(tmp_path)
    counts = b'{"orders": 412, "pages": 12}'

    async def main() -> str:
        async with waypost.arun("bytes", owner="alice", target="none:", max_silence=600,
                                actor="w1", store=store_url) as run:
            await run.artifact_bytes("counts.json", counts, role="result")
            run.sync.artifact_bytes("log.txt", iter([b"page 1 ok\n", b"page 2 ok\n"]))
            with pytest.raises(waypost.errors.TooLarge):
                run.sync.artifact_bytes("big.txt", [b"x" * 40, b"y" * 40])
            with pytest.raises(waypost.InvalidInput, match="not bytes"):
                run.sync.artifact_bytes("text.txt", ["a str, not bytes"])  # type: ignore[list-item]
            await run.evidence([sys.executable, "-c", "pass"], kind="test")
            await run.ready("counted", artifacts=["counts.json"])
            return run.id

    run_id = asyncio.run(main())
    packet = packet_of(store_url, run_id)
    assert [(a.name, a.bytes, a.media_type) for a in packet.artifacts] == [
        ("counts.json", len(counts), "application/json"), ("log.txt", 20, "text/plain")]
    with open_store(store_url) as store:
        assert store.get_blob(packet.artifacts[0].sha256 or "") == counts


def test_arun_takes_what_run_takes() -> None:
    assert inspect.signature(waypost.arun).parameters == inspect.signature(
        waypost.run).parameters


def test_a_bad_heartbeat_pace_is_refused_before_the_run_exists(store_url: str) -> None:
    with pytest.raises(waypost.InvalidInput, match="heartbeat_every"):
        in_block("sync", store_url, submit, heartbeat_every=float("nan"))
    with open_store(store_url) as store:
        assert store.run_ids() == []


def test_a_command_string_is_split_as_a_shell_would_and_run_without_one(
        store_url: str) -> None:
    found: list[waypost.Evidence] = []
    in_block("sync", store_url, lambda run: found.append(
        run.evidence(f"{sys.executable} -c 'import sys; print(sys.argv[1:])' ; 'a b'")))
    assert found[0].output_tail == "[';', 'a b']\n"  # no shell took the `;`
    with pytest.raises(waypost.InvalidInput, match=r"unclosed|No closing"):
        in_block("sync", store_url, lambda run: run.evidence("echo 'unclosed"))


def test_a_bad_kind_is_refused_naming_the_allowed_ones(store_url: str) -> None:
    with pytest.raises(waypost.InvalidInput, match="failed_command"):
        in_block("sync", store_url, lambda run: run.block("waiting", "for the API key"))


def test_the_failure_detail_fits_its_limit() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise OverflowError("x" * 50_000)
        deep(n - 1)

    try:
        deep(200)
    except OverflowError as exc:
        detail = failure_detail(exc)
    assert len(detail) <= TEXT_LIMITS["detail"]
    assert detail.startswith("waypost.run: the with block raised OverflowError: xxx")
    assert "in deep" in detail[-200:]  # the end of the traceback, where it was raised


def test_on_postgresql_too(pg_url: str) -> None:
    """The heartbeat thread shares the store with the block: the pool's connections too."""
    def busy(run: Worker) -> None:
        time.sleep(0.3)
        submit(run)

    run_id = in_block("sync", pg_url, busy)
    types = event_types(pg_url, run_id)
    assert types.count("heartbeat") >= 2
    assert packet_of(pg_url, run_id).state is waypost.State.READY_FOR_REVIEW
    with pytest.raises(ValueError, match="bad row 17"):
        in_block("async", pg_url, raise_deep)
