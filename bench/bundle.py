"""13. A run handed to anyone: `waypost export` and `verify-bundle` of a run with 10,000
events and 100 MB of blobs, beside their floors, with the memory each holds at its peak;
and the fold at 1,000 and 10,000 evidence items, per event.

The floors: writing a tar of the very same members' bytes, already in memory (the least an
export can cost), and one SHA-256 pass over the bundle file (the least a verification that
reads every byte can cost). `waypost verify RUN` of the same run in its store is the
baseline a verification without the store is compared with. Memory is Python's traced
peak during one export and one verification: flat means near the largest single blob,
whatever the bundle's size.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import tarfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import waypost
from bench.harness import Section, check, figures, interleave
from waypost.core.history import GENESIS, make_event, verify_run
from waypost.core.machine import apply, fold
from waypost.events import AnyEventData, Claimed, Event, EvidenceRecorded, Started
from waypost.model import Assurance, Evidence, EvidenceKind, Kind, Packet, Verdict
from waypost.store import Store
from waypost.store.keys import PublicKey
from waypost.usecases import keys
from waypost.usecases.bundles import export
from waypost.usecases.verifying import Outcome, verify

EXPORT, VERIFY = "waypost export RUN", "waypost verify-bundle FILE"
TAR_FLOOR, HASH_FLOOR = "floor: tar of the same bytes", "floor: sha256 of the bundle file"
STORE_VERIFY = "baseline: waypost verify RUN (in its store)"
FOLD_LIMIT = 2.0  # linear: the per-event cost stays level from 1,000 to 10,000 items
MB = 1024 * 1024


def fill(store: Store, *, events: int, blob_mb: int) -> str:
    """A run of `events` events (evidence and heartbeats, half each) and `blob_mb` stored
    artifacts of 1 MB."""
    run, _ = waypost.start(store, "Bundle bench", actor="owner", owner="owner")
    worker = waypost.Run(store, run.id, actor="worker")
    worker.claim()
    chunk = os.urandom(MB)
    for i in range(blob_mb):
        worker.add_artifact_bytes(f"part-{i}.bin", [chunk[:-8] + i.to_bytes(8, "big")],
                                  role=waypost.ArtifactRole.RESULT, max_bytes=2 * MB)
    left = max(0, events - 2 - blob_mb)
    for i in range(left):
        if i % 2:
            worker.heartbeat(note=f"step {i}")
        else:
            worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, f"check {i} passed")
    return run.id


def _seconds(operation: Callable[[], object]) -> float:
    start = time.perf_counter()
    operation()
    return (time.perf_counter() - start) * 1000


def _tar_floor(members: list[tuple[str, bytes]], out: Path) -> None:
    with out.open("wb") as file, tarfile.open(fileobj=file, mode="w|") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _hash_floor(path: Path) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while part := file.read(MB):
            digest.update(part)


def _export(store: Store, run_id: str, signer: keys.Signer, out: Path) -> None:
    out.unlink(missing_ok=True)
    export(store, run_id, str(out), signer)


def _verify(path: Path, pinned: tuple[PublicKey, ...]) -> None:
    with path.open("rb") as file:
        report = verify(file, pinned)
    assert report.outcome is Outcome.VERIFIED, report.message


def _peak_mb(operation: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        operation()
        return tracemalloc.get_traced_memory()[1] / MB
    finally:
        tracemalloc.stop()


def evidence_events(count: int) -> list[Event]:
    """A run's events in memory: its start, a claim and `count` evidence items."""
    at = datetime(2026, 1, 2, tzinfo=UTC)
    out: list[Event] = []
    packet: Packet | None = None
    bodies: list[AnyEventData] = [
        Started(title="fold", kind=Kind.BOUNDED, owner="o", target="none:"), Claimed(epoch=1)]
    for step, body in enumerate(bodies):
        out.append(make_event(packet, "wp_fold", body, actor="o" if step == 0 else "w",
                              at=at, prev_hash=out[-1].hash if out else GENESIS))
        packet = apply(packet, out[-1])
    for i in range(count):
        item = Evidence(id=f"e{i + 1}", kind=EvidenceKind.TEST, verdict=Verdict.PASSED,
                        assurance=Assurance.REPORTED, summary="ok", recorded_at=at,
                        recorded_by="w")
        out.append(make_event(packet, "wp_fold", EvidenceRecorded(evidence=item), actor="w",
                              at=at + timedelta(microseconds=i), epoch=1,
                              prev_hash=out[-1].hash))
        packet = apply(packet, out[-1])
    return out


def _fold_us(events: list[Event]) -> float:
    return _seconds(functools.partial(fold, events)) * 1e3 / len(events)


def run(folder: Path, *, rounds: int, events: int = 10_000, blob_mb: int = 100,
        fold_sizes: tuple[int, int] = (1_000, 10_000)) -> Section:
    store = waypost.open_store(str(folder / ".waypost" / "bundle.db"))
    run_id = fill(store, events=events, blob_mb=blob_mb)
    keys.generate(store, holder="bench", out=str(folder / "k.pem"),
                  now=datetime.now(UTC) - timedelta(minutes=1))
    signer = keys.load_signer(store, path=str(folder / "k.pem"), env=None)
    pinned = keys.keyring(store).keys
    bundle = folder / "run.tar"
    _export(store, run_id, signer, bundle)
    with tarfile.open(bundle) as tar:
        members = [(m.name, tar.extractfile(m).read())  # type: ignore[union-attr]
                   for m in tar.getmembers()]
    subjects = {
        EXPORT: functools.partial(_seconds, functools.partial(_export, store, run_id, signer,
                                                              bundle)),
        TAR_FLOOR: functools.partial(_seconds, functools.partial(_tar_floor, members,
                                                                 folder / "floor.tar")),
        VERIFY: functools.partial(_seconds, functools.partial(_verify, bundle, pinned)),
        HASH_FLOOR: functools.partial(_seconds, functools.partial(_hash_floor, bundle)),
        STORE_VERIFY: functools.partial(_seconds, lambda: verify_run(
            run_id, store.events(run_id), store.get(run_id))),
    }
    section = Section(key="bundle", title=f"13. Export and verify-bundle ({events:,} events, "
                      f"{blob_mb} MB of blobs)", unit="ms", higher_is_better=False,
                      figures=figures(interleave(subjects, rounds)))
    section.add_ratio("export / tar of the same bytes", EXPORT, TAR_FLOOR)
    section.add_ratio("verify-bundle / sha256 of the file", VERIFY, HASH_FLOOR)
    section.add_ratio("verify-bundle / verify in the store", VERIFY, STORE_VERIFY)
    del members
    size_mb = bundle.stat().st_size / MB
    export_peak = _peak_mb(functools.partial(_export, store, run_id, signer, bundle))
    verify_peak = _peak_mb(functools.partial(_verify, bundle, pinned))
    section.counts = {"events": len(store.events(run_id)), "bundle MB": round(size_mb),
                      "export peak traced MB": round(export_peak),
                      "verify-bundle peak traced MB": round(verify_peak)}
    small, large = (_fold_us(evidence_events(n)) for n in fold_sizes)
    section.targets.append(check(f"fold linear (µs/event at {fold_sizes[1]:,} evidence items "
                                 f"<= {FOLD_LIMIT:.0f}x at {fold_sizes[0]:,})", large / small,
                                 FOLD_LIMIT, at_least=False,
                                 detail=f"{small:.1f} and {large:.1f} µs/event"))
    section.notes.append(f"{rounds} interleaved rounds; blobs of 1 MB each, {blob_mb} of them; "
                         "memory peaks measured once each, outside the timed rounds")
    section.notes.append(f"bundle {size_mb:.0f} MB; Python's traced peak: export "
                         f"{export_peak:.1f} MB, verify-bundle {verify_peak:.1f} MB")
    store.close()
    return section
