"""A bundle is hostile input: whatever bytes `verify-bundle` is given (a truncated tar,
huge member names, names that climb out of a directory, links, devices, random bytes), it
answers with a report naming what is wrong, never crashes, never writes a file, and reads
within its bounds."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bundle_support import delivered_run, exported, ring, signer
from tests.helpers import FakeClock
from waypost.store import open_store
from waypost.store.keys import PublicKey
from waypost.usecases.verifying import Outcome, verify

GOOD_NAMES = ["manifest.json", "packet.json", "events.jsonl", "statement.dsse.json",
              "blobs/" + "0" * 64, "keys/" + "a" * 64 + ".pem"]
BAD_NAMES = ["../escaped", "/etc/passwd", "blobs/../../escaped", "./manifest.json",
             "keys/../../x.pem", "manifest.json/", "a" * 5000, "blobs/" + "0" * 63,
             "événement", "manifest.json\x00x"]
KINDS = [tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE,
         tarfile.FIFOTYPE, tarfile.CHRTYPE]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[bytes, tuple[PublicKey, ...]]]:
    where = tmp_path_factory.mktemp("bundle")
    before = os.getcwd()
    os.chdir(where)
    try:
        with open_store(str(where / ".waypost" / "w.db")) as store:
            run_id = delivered_run(store, FakeClock(), where)
            path, _ = exported(store, run_id, where, signer(store, where))
            yield path.read_bytes(), ring(store)
    finally:
        os.chdir(before)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@st.composite
def hostile_tars(draw: st.DrawFn) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for _ in range(draw(st.integers(0, 6))):
            info = tarfile.TarInfo(draw(st.sampled_from(GOOD_NAMES + BAD_NAMES)))
            info.type = draw(st.sampled_from(KINDS))
            data = draw(st.binary(max_size=300)) if info.type == tarfile.REGTYPE else b""
            if info.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = draw(st.sampled_from(["/etc/passwd", "../../x", "blobs"]))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    whole = buffer.getvalue()
    return whole[: draw(st.integers(0, len(whole)))] if draw(st.booleans()) else whole


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(hostile_tars(), st.binary(max_size=2000)))
def test_any_bytes_get_a_report_and_write_nothing(data: bytes, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    report = verify(io.BytesIO(data))
    assert not report.ok
    assert report.outcome is not Outcome.VERIFIED
    assert len(report.message) < 2000
    assert _tree(tmp_path) == before


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**7), where=st.integers(min_value=0))
def test_a_real_bundle_cut_or_damaged_anywhere_gets_a_report(
        real: tuple[bytes, tuple[PublicKey, ...]], cut: int, where: int) -> None:
    data, keys = real
    cut %= len(data)
    truncated = verify(io.BytesIO(data[:cut]), keys)
    # only the end-of-archive padding may be cut from a bundle that still verifies
    assert truncated.ok is False or cut >= len(data) - 2 * 10240
    at = where % len(data)
    damaged = data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]
    report = verify(io.BytesIO(damaged), keys)
    assert report.outcome in Outcome
    assert not report.ok or data[at:at + 1] == b"\0"


def test_the_whole_real_bundle_verifies(real: tuple[bytes, tuple[PublicKey, ...]]) -> None:
    data, keys = real
    assert verify(io.BytesIO(data), keys).outcome is Outcome.VERIFIED
