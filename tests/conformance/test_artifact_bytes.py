"""Conformance: the one verb that records bytes as an artifact (`Run.add_artifact_bytes`,
which the HTTP upload, MCP's inline content and the SDK call). Everything is decided before
a byte is read (the name, the media type, a declared size, the run's rules, the lease);
the bytes are counted as they come; a refusal stores no blob and changes no row."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import FakeClock
from waypost.errors import (
    IllegalTransition,
    InvalidInput,
    NotFound,
    StaleLease,
    TooLarge,
    WaypostError,
)
from waypost.model import ArtifactRole, Authority, Kind
from waypost.store import Store
from waypost.usecases import runs, starting

LIMIT = 64


class Chunks:
    """Chunks handed out one at a time, remembering how many were taken."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.taken = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.taken += 1
            yield chunk

    @property
    def digest(self) -> str:
        return hashlib.sha256(b"".join(self.chunks)).hexdigest()


def _taken_over(store: Store, clock: FakeClock) -> tuple[str, runs.Run, runs.Run]:
    """A run w1 claimed and w2 then took over: (its id, w1's stale handle, w2's)."""
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=1800, clock=clock)
    stale = runs.Run(store, run.id, actor="w1", clock=clock)
    stale.claim()
    run.transfer(Authority.TAKEOVER, "w2")
    holder = runs.Run(store, run.id, actor="w2", clock=clock)
    holder.claim()
    return run.id, stale, holder


def test_bytes_are_counted_stored_and_recorded(store: Store, clock: FakeClock) -> None:
    run_id, _, holder = _taken_over(store, clock)
    chunks = Chunks(b"# Report\n", b"The lock is taken first now.\n")
    packet = holder.add_artifact_bytes("report.md", chunks, role=ArtifactRole.REPORT,
                                       max_bytes=LIMIT)
    record = packet.artifact("report.md")
    assert record is not None
    assert (record.sha256, record.bytes, record.media_type, record.stored, record.path) == (
        chunks.digest, 38, "text/markdown", True, None)
    assert (record.recorded_by, record.role) == ("w2", ArtifactRole.REPORT)
    assert store.get_blob(chunks.digest) == b"".join(chunks.chunks)
    assert holder.artifact("report.md")[1] == b"".join(chunks.chunks)
    typed = holder.add_artifact_bytes("data", Chunks(b"{}"), role=ArtifactRole.OTHER,
                                      max_bytes=LIMIT, media_type="Application/JSON")
    assert [a.media_type for a in typed.artifacts if a.name == "data"] == ["application/json"]
    assert store.get(run_id).version == packet.version + 1


@pytest.mark.parametrize(("why", "expected", "read"), [
    ("past the limit as it streams", TooLarge, True),
    ("declared past the limit", TooLarge, False),
    ("a hidden name", InvalidInput, False),
    ("a bad media type", InvalidInput, False),
    ("a stale lease", StaleLease, False),
    ("not the holder", StaleLease, False),
    ("a final run", IllegalTransition, False),
    ("no such run", NotFound, False),
])
def test_a_refusal_stores_no_blob_and_changes_no_row(
        store: Store, clock: FakeClock, why: str, expected: type[WaypostError],
        read: bool) -> None:
    run_id, stale, holder = _taken_over(store, clock)
    final, _ = starting.start(store, "c", actor="alice", target="none:", clock=clock)
    final.cancel("not needed")
    chunks = Chunks(f"unique bytes for {why}: ".encode(), b"x" * (LIMIT // 2))
    handle, name = holder, "notes.md"
    options: dict[str, Any] = {}
    if why == "past the limit as it streams":
        chunks = Chunks(*[b"y" * 20] * 4, b"never read")
    elif why == "declared past the limit":
        options = {"size": LIMIT + 1}
    elif why == "a hidden name":
        name = ".bashrc"
    elif why == "a bad media type":
        options = {"media_type": "text"}
    elif why == "a stale lease":
        handle = stale
    elif why == "not the holder":
        handle = runs.Run(store, run_id, actor="mallory", clock=clock)
    elif why == "a final run":
        handle = runs.Run(store, final.id, actor="alice", clock=clock)
    elif why == "no such run":
        handle = runs.Run(store, "wp_nope", actor="w2", clock=clock)
    before = (store.get(run_id), store.events(run_id), store.get(final.id))
    with pytest.raises(expected):
        handle.add_artifact_bytes(name, chunks, role=ArtifactRole.REPORT, max_bytes=LIMIT,
                                  **options)
    assert (store.get(run_id), store.events(run_id), store.get(final.id)) == before
    with pytest.raises(NotFound):
        store.get_blob(chunks.digest)
    # decided before a byte was read, or refused as soon as the count passed the limit
    assert chunks.taken == (4 if read else 0)
