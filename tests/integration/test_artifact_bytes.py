"""Bytes recorded as an artifact through the HTTP upload and MCP's inline content, which
call the one verb (`Run.add_artifact_bytes`): what is recorded is what was sent, and a
refusal (too large, declared or counted; a bad name; a stale lease; not the lease holder)
stores no blob and changes no row of the store."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.helpers import dump_store
from tests.http_support import Api, issue, serving
from tests.integration.test_mcp import call, drive, refused, server
from waypost.config import Config
from waypost.model import Authority
from waypost.store import open_store
from waypost.usecases import runs, starting

LIMIT = 100


def started(store: Path) -> str:
    """A run owned by alice whose worker w1 was taken over by the owner: w1's epoch 1 is
    stale, alice holds epoch 2."""
    with open_store(str(store), create=True) as opened:
        run, _ = starting.start(opened, "Write it", actor="alice", owner="alice",
                                target="none:", worker="w1")
        runs.Run(opened, run.id, actor="alice").claim()
        return run.id


def test_an_upload_records_the_bytes_sent(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run = started(store)
    with serving(str(store), project=Config(max_artifact_bytes=LIMIT)) as base:
        alice = Api(base, issue(str(store), "alice", "owner"))
        sent = b"# Notes\n\nThe lock is taken before the counter is read.\n"
        answer = alice.post(f"/api/runs/{run}/artifacts/notes.md", content=sent,
                            role="report", epoch=2)
        assert answer.status_code == 200, answer.text
        assert answer.json()["sha256"] == hashlib.sha256(sent).hexdigest()
        assert answer.json()["bytes"] == len(sent)
        assert alice.get(f"/api/runs/{run}/artifacts/notes.md").content == sent


def test_a_refused_upload_stores_no_blob_and_changes_no_row(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run = started(store)

    def streamed() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield from [b"y" * 40] * 3

    with serving(str(store), project=Config(max_artifact_bytes=LIMIT)) as base:
        w1 = Api(base, issue(str(store), "w1", "worker", run))
        mallory = Api(base, issue(str(store), "mallory", "worker", run))
        alice = Api(base, issue(str(store), "alice", "owner"))
        cases: list[tuple[str, Api, str, int | None, bytes | Iterator[bytes], int, str]] = [
            ("declared too large", alice, "notes.md", 2, b"x" * (LIMIT + 1), 413, "too_large"),
            ("counted too large", alice, "notes.md", 2, streamed(), 413, "too_large"),
            ("a hidden name", alice, ".notes.md", 2, b"fine", 422, "invalid_input"),
            ("a stale lease", w1, "notes.md", 1, b"late", 409, "stale_lease"),
            ("not the holder", mallory, "notes.md", None, b"mine", 409, "stale_lease"),
        ]
        for why, caller, name, epoch, body, status, code in cases:
            before = dump_store(store)
            params = {} if epoch is None else {"epoch": epoch}
            answer = httpx.post(f"{base}/api/runs/{run}/artifacts/{name}", content=body,
                                params=params, timeout=30,
                                headers={"Authorization": f"Bearer {caller.token}"})
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), why
            assert dump_store(store) == before, why


def test_inline_content_over_mcp_is_recorded_and_a_refusal_changes_nothing(
        tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run = started(store)
    (tmp_path / "waypost.toml").write_text(f"[limits]\nmax_artifact_bytes = {LIMIT}\n")

    async def scenario() -> None:
        async with server(store, "alice") as alice:  # the owner holds the lease
            text = "# Notes\n\nThe lock is taken before the counter is read.\n"
            added = await call(alice, "add_artifact", run=run, name="notes.md",
                               role="report", content=text)
            assert added["artifact"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
            before = dump_store(store)
            too_large = await refused(alice, "add_artifact", run=run, name="big.md",
                                      content="x" * (LIMIT + 1))
            assert f"above the artifact limit of {LIMIT} bytes" in too_large
            hidden = await refused(alice, "add_artifact", run=run, name=".big.md",
                                   content="hidden")
            assert "bad artifact name" in hidden
            assert dump_store(store) == before
        async with server(store, "mallory") as mallory:
            text = await refused(mallory, "add_artifact", run=run, name="mine.md",
                                 content="not the holder's")
            assert "does not hold the lease" in text
            assert dump_store(store) == before

    drive(scenario)


def test_inline_content_from_a_taken_over_session_is_refused(tmp_path: Path) -> None:
    """The server's session holds the epoch it took; once another process of the same
    worker claims the run again, the session's writes are stale, and its inline artifact
    stores nothing."""
    store = tmp_path / "w.db"
    run = started(store)

    async def scenario() -> None:
        async with server(store, "w2") as w2:
            with open_store(str(store)) as opened:
                runs.Run(opened, run, actor="alice").transfer(Authority.TAKEOVER, "w2")
            await call(w2, "resume", run=run)  # epoch 3, held by this session
            with open_store(str(store)) as opened:
                runs.Run(opened, run, actor="w2").claim()  # epoch 4, elsewhere
            before = dump_store(store)
            text = await refused(w2, "add_artifact", run=run, name="late.md",
                                 content="written after the takeover")
            assert "with lease epoch 3, but a newer process of w2 took the lease" in text
            assert dump_store(store) == before

    drive(scenario)
