"""A damaged store, a full disk, and store paths no user may use, through the CLI.

The bad-input campaign's damaged-store rows: generated damage (random bytes at random
offsets, a truncated file, a zeroed page, an edited event body) followed by every hot verb
and `unblock`, `verify` and `doctor`. Every exit is a documented code, never 1 (a bug;
`doctor` exits 1 when a check fails, as documented), and a write that goes in chains onto a
head event that hashes to what the run records: a write never seals a damaged head. CI
runs a short campaign; `WAYPOST_CAMPAIGN=long` runs a long one.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from tests import pg, tamper
from tests.helpers import FakeClock
from waypost.cli import main
from waypost.core.history import check_head, event_hash, prepare
from waypost.durations import utcnow
from waypost.errors import IntegrityError
from waypost.events import Event, Heartbeat
from waypost.model import BlockerKind, Kind, from_json
from waypost.store import Store, open_store
from waypost.usecases import runs, starting, watchdog

LONG = os.environ.get("WAYPOST_CAMPAIGN") == "long"
DOCUMENTED = {0, 2, 3, 4, 5, 75}
IN_CI = os.environ.get("CI") == "true"
WRITES = ("heartbeat", "block", "unblock")


def call(url: str, *argv: str, actor: str = "alice") -> tuple[int, str, str]:
    """`waypost ARGV` in this process against the store at `url`, as `actor`."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in ("WAYPOST_URL", "WAYPOST_ACTOR", "WAYPOST_EPOCH")}
    os.environ.update(WAYPOST_URL=url, WAYPOST_ACTOR=actor)
    os.environ.pop("WAYPOST_EPOCH", None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, out.getvalue(), err.getvalue()


def ok(url: str, *argv: str, actor: str = "alice") -> str:
    code, out, err = call(url, *argv, actor=actor)
    assert code == 0, f"waypost {' '.join(argv)} → {code}: {err}"
    return out.strip()


def populate(url: str) -> tuple[str, str]:
    """Two runs w1 holds: one in progress with a few heartbeats, one blocked by b1."""
    made = []
    for title in ("moving", "blocked"):
        run = json.loads(ok(url, "start", title, "--target", "none:", "--kind", "long_running",
                            "--max-silence", "1h", "--json"))["run"]
        ok(url, "claim", run, actor="w1")
        for n in range(3):
            ok(url, "heartbeat", run, "--note", f"step {n} " + "x" * 300, actor="w1")
        made.append(run)
    ok(url, "block", made[1], "--kind", "other", "--detail", "the disk is flaky", actor="w1")
    return made[0], made[1]


def edit_event(url: str, run_id: str, seq: int | None = None) -> int:
    """Edit one event's body behind the store's back, its hash left as it was (the head
    event by default); returns the seq edited."""
    with open_store(url) as store:
        events = store.events(run_id)
        target = events[-1] if seq is None else events[seq - 1]
        data = target.data
        edited = (msgspec.structs.replace(data, note="edited")
                  if isinstance(data, Heartbeat) else Heartbeat(note="forged"))
        tamper.overwrite_event(store, msgspec.structs.replace(target, data=edited))
    return target.seq


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with pg.each_backend(request.param, tmp_path) as found:
        yield found


def _events_as_stored(url: str, run_id: str) -> list[str]:
    with open_store(url) as store:
        return [msgspec.json.encode(e).decode() for e in store.events(run_id)]


# --- item: a write on an edited head, and doctor on an edited event -----------------------


def test_a_write_on_an_edited_head_event_is_refused_naming_the_run(url: str) -> None:
    moving, blocked = populate(url)
    edit_event(url, moving)
    edit_event(url, blocked)
    before = {run: _events_as_stored(url, run) for run in (moving, blocked)}
    refusals = [call(url, "heartbeat", moving, "--note", "on top", "--json", actor="w1"),
                call(url, "unblock", blocked, "b1", "--resolution", "fine", "--json",
                     actor="w1"),
                call(url, "block", moving, "--kind", "other", "--detail", "x", "--json",
                     actor="w1")]
    for (code, _, err), run in zip(refusals, (moving, blocked, moving), strict=True):
        assert code == 3, err
        error = json.loads(err)["error"]
        assert error["code"] == "integrity"
        assert f"run {run}: its head event" in error["message"]
        assert f"waypost verify {run}" in error["hint"]
    assert {run: _events_as_stored(url, run) for run in (moving, blocked)} == before
    code, out, _ = call(url, "doctor", "--json")
    assert code == 1
    history = {c["name"]: c for c in json.loads(out)["checks"]}["history"]
    assert history["status"] == "fail"
    assert moving in history["detail"]
    assert blocked in history["detail"]


def test_a_head_event_edited_with_its_own_hash_recomputed_is_still_refused(url: str) -> None:
    """The head must hash to the head the run records, not merely to its own `hash` field:
    an edit that recomputes the event's hash still leaves the run's record behind it."""
    moving, _ = populate(url)
    with open_store(url) as store:
        head = store.events(moving)[-1]
        data = msgspec.structs.replace(head.data, note="edited, hash recomputed")
        rehashed = event_hash(prev_hash=head.prev_hash, run_id=head.run_id, seq=head.seq,
                              at=head.at, actor=head.actor, epoch=head.epoch, data=data)
        tamper.overwrite_event(store, msgspec.structs.replace(head, data=data, hash=rehashed))
    before = _events_as_stored(url, moving)
    code, _, err = call(url, "heartbeat", moving, "--note", "on top", "--json", actor="w1")
    assert code == 3, err
    error = json.loads(err)["error"]
    assert (error["code"], f"waypost verify {moving}" in error["hint"]) == ("integrity", True)
    assert _events_as_stored(url, moving) == before


def test_every_snapshot_a_store_hands_out_carries_its_head_event(store: Store) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                            max_silence=60)
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    worker.heartbeat(note="one")
    loaded = store.load(run.id)
    (due,) = store.due_runs(now=utcnow() + timedelta(hours=1))
    for snap in (loaded, due):
        assert snap.head is not None
        assert not snap.head_checked
        check_head(snap)  # the head as stored hashes to the head the run records
    tamper.overwrite_event(store, msgspec.structs.replace(store.events(run.id)[-1],
                                                          actor="mallory"))
    with pytest.raises(IntegrityError, match=f"run {run.id}: its head event"):
        prepare(store.load(run.id), [(Heartbeat(note="two"), worker.epoch)], actor="w1",
                at=utcnow())
    with pytest.raises(IntegrityError, match=f"run {run.id}: its head event"):
        worker.heartbeat(note="two")  # its handle's own last write: read again, refused


def test_doctor_fails_on_an_event_edited_inside_a_chain(url: str) -> None:
    moving, _ = populate(url)
    ok(url, "doctor")  # healthy first: every chain verifies
    seq = edit_event(url, moving, seq=2)
    code, out, _ = call(url, "doctor", "--json")
    assert code == 1
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["history"]["status"] == "fail"
    assert f"run {moving} seq {seq}: hash mismatch" in checks["history"]["detail"]
    assert checks["runs"]["status"] == "ok"  # every packet reads: only the chain says it


def test_doctor_bounds_its_verify_and_says_what_it_left(tmp_path: Path) -> None:
    url = str(tmp_path / "w.db")
    moving, _blocked = populate(url)
    edit_event(url, moving, seq=2)  # the older run: beyond a limit of one
    code, out, _ = call(url, "doctor", "--history-limit", "1", "--json")
    history = {c["name"]: c for c in json.loads(out)["checks"]}["history"]
    assert (code, history["status"]) == (0, "warn")
    assert "the newest 1 of 2 run(s)" in history["detail"]
    assert call(url, "doctor", "--json")[0] == 1


def test_doctor_shows_its_progress_through_a_large_store_on_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from waypost.cli import ops

    url = str(tmp_path / "w.db")
    populate(url)
    monkeypatch.setattr(ops, "PROGRESS_EVERY", 1)  # a store of two runs, taken as large
    code, out, err = call(url, "doctor", "--json")
    assert code == 0
    assert err.splitlines() == ["waypost doctor: verified 1 of 2 run(s)"]
    assert json.loads(out)["ok"] is True  # stdout stays one document


def test_a_handles_write_with_a_notice_is_refused_on_a_head_edited_since_it_wrote_it(
        store: Store) -> None:
    """README: for a long-lived writer (an SDK handle) the commit is refused when the event
    it wrote last was altered since, whatever the write: here a block, whose notice makes
    it more than the one statement a heartbeat is."""
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                            max_silence=60, notify="file:logs/n.jsonl")  # never sent here
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    worker.heartbeat(note="one")  # the handle keeps this write as its head
    tamper.overwrite_event(store, msgspec.structs.replace(store.events(run.id)[-1],
                                                          actor="mallory"))
    before = [msgspec.json.encode(e) for e in store.events(run.id)]
    with pytest.raises(IntegrityError, match=f"run {run.id}: its head event"):
        worker.block(BlockerKind.OTHER, "the disk is flaky")
    assert [msgspec.json.encode(e) for e in store.events(run.id)] == before
    assert store.get(run.id).state.value == "in_progress"


def test_the_watchdog_records_nothing_on_a_run_whose_head_was_edited(
        store: Store, clock: FakeClock) -> None:
    """The watchdog is a writer too: a silent run whose head event was edited gets no
    blocker chained onto it; the sweep names the run among its errors."""
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                            max_silence=2, clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.heartbeat(note="one")
    tamper.overwrite_event(store, msgspec.structs.replace(store.events(run.id)[-1],
                                                          actor="mallory"))
    before = [msgspec.json.encode(e) for e in store.events(run.id)]
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(60))
    assert report.actions == ()
    assert any(run.id in error and "head event" in error for error in report.errors), report
    assert [msgspec.json.encode(e) for e in store.events(run.id)] == before


# --- item: a full disk ---------------------------------------------------------------------

FILL = """
import json, os, subprocess, sys
folder, store = sys.argv[1], os.path.join(sys.argv[1], "w.db")
def waypost(*args, at=store):
    proc = subprocess.run([sys.executable, "-m", "waypost", *args, "--store", at],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr
run = json.loads(waypost("start", "t", "--target", "none:", "--kind", "long_running",
                         "--max-silence", "1h", "--json")[1])["run"]
waypost("claim", run, "--as", "w1")
free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
with open(os.path.join(folder, "filler"), "wb") as filler:  # another program's file
    filler.write(b"f" * max(0, free - 48 * 1024))
heartbeats = []
for n in range(100):
    code, _, err = waypost("heartbeat", run, "--note", "n" * 3000, "--as", "w1")
    heartbeats.append(code)
    if code:
        break
doctor = waypost("doctor", "--json")
other = os.path.join(folder, "other.db")
fresh = waypost("start", "u", "--target", "none:", at=other)[0]  # a new store: no room
verify = waypost("verify", run)[0]
os.remove(os.path.join(folder, "filler"))
after = waypost("heartbeat", run, "--note", "room again", "--as", "w1")[0]
fresh_after = waypost("start", "u", "--target", "none:", at=other)[0]
print(json.dumps({"heartbeats": heartbeats, "error": err, "doctor": doctor[0],
                  "checks": json.loads(doctor[1])["checks"], "verify": verify,
                  "fresh": fresh, "fresh_after": fresh_after,
                  "after": after, "verify_after": waypost("verify", run)[0]}))
"""


def _tiny_disk_prefix() -> list[str]:
    """How to run a command with a private mount namespace in which it may mount a tmpfs:
    as root, `unshare --mount`; otherwise a user namespace, where the system allows it."""
    if os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--mount"]
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                           capture_output=True, check=False) if shutil.which("unshare") else None
    if probe is not None and probe.returncode == 0:
        return ["unshare", "--user", "--map-root-user", "--mount"]
    if IN_CI:
        pytest.fail("CI must run the full-disk test: neither root nor user namespaces here")
    pytest.skip("a tmpfs needs root or unprivileged user namespaces, and neither is here")


def test_a_full_disk_exits_75_naming_it_and_doctor_says_so(tmp_path: Path) -> None:
    """A real ENOSPC: the store's folder is a 1 MiB tmpfs, filled by another file."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    script = 'mount -t tmpfs -o size=1m tmpfs "$1" || exit 99; shift; exec "$@"'
    proc = subprocess.run([*_tiny_disk_prefix(), "sh", "-c", script, "sh", str(folder),
                           sys.executable, "-c", FILL, str(folder)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["heartbeats"][-1] == 75, seen  # the disk filled up: 75, never 1
    assert set(seen["heartbeats"][:-1]) <= {0}
    assert "disk full" in seen["error"]
    assert str(folder) in seen["error"]
    assert seen["verify"] == 0  # nothing committed was lost
    disk = {c["name"]: c for c in seen["checks"]}["disk"]
    assert (seen["doctor"], disk["status"]) == (1, "fail")
    assert str(folder) in disk["detail"]
    assert "full" in disk["detail"]
    assert seen["fresh"] == 75  # a new store on the full disk: 75 too
    assert seen["fresh_after"] == 0  # ... and what it left does not stand in the way
    assert (seen["after"], seen["verify_after"]) == (0, 0)  # room again: writes go on


NO_INODES = """
import json, os, subprocess, sys
folder = sys.argv[1]
def start(at):
    proc = subprocess.run([sys.executable, "-m", "waypost", "start", "t", "--target", "none:",
                           "--store", at, "--json"], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, proc.stderr
before = start(os.path.join(folder, "pre.db"))[0]  # a store made while there was room
fillers = []
while True:  # another program's files take every file entry the disk has
    try:
        open(os.path.join(folder, f"f{len(fillers)}"), "x").close()
    except OSError:
        break
    fillers.append(os.path.join(folder, f"f{len(fillers)}"))
full = start(os.path.join(folder, "w.db"))
nested = start(os.path.join(folder, "new", "w.db"))  # its folder cannot be made either
doctor = subprocess.run([sys.executable, "-m", "waypost", "doctor", "--json", "--store",
                         os.path.join(folder, "pre.db")], capture_output=True, text=True,
                        timeout=120)
disk = [c for c in json.loads(doctor.stdout)["checks"] if c["status"] == "fail"]
from waypost.store.sqlite.checks import disk_diagnosis
diag = disk_diagnosis(os.path.join(folder, "pre.db"))  # as doctor checks an open store
for filler in fillers:
    os.remove(filler)
print(json.dumps({"before": before, "full": full, "nested": nested, "disk": disk,
                  "diag": [str(diag.status), diag.detail],
                  "after": start(os.path.join(folder, "w.db"))[0]}))
"""


def test_a_disk_without_a_free_file_entry_is_a_full_disk_too(tmp_path: Path) -> None:
    """ENOSPC from a disk out of inodes, with bytes to spare: a new store there is 75."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    script = 'mount -t tmpfs -o size=1m,nr_inodes=16 tmpfs "$1" || exit 99; shift; exec "$@"'
    proc = subprocess.run([*_tiny_disk_prefix(), "sh", "-c", script, "sh", str(folder),
                           sys.executable, "-c", NO_INODES, str(folder)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["before"] == 0
    for code, err in (seen["full"], seen["nested"]):
        assert code == 75, err
        assert "disk full" in err
        assert str(folder) in err
    # doctor does not call a disk with no file entry left "ok": SQLite's journal needs one
    assert seen["disk"], "doctor failed no check on a disk with no file entry left"
    assert any("disk full" in c["detail"] or "file entr" in c["detail"] for c in seen["disk"])
    status, detail = seen["diag"]  # its disk check, where the store opens: no file entry
    assert status == "fail", detail
    assert "file entries" in detail
    assert seen["after"] == 0  # room again: the store is made


def test_a_full_disk_sqlite_only_words_is_75_too(tmp_path: Path) -> None:
    """An error SQLite raises without its result code (the driver raises some so, e.g. one
    made from the engine's message alone) is still a full disk when it says so."""
    import sqlite3

    from waypost.store.sqlite.setup import driver_error

    store = str(tmp_path / "w.db")
    said = driver_error(sqlite3.OperationalError("database or disk is full"), store,
                        "write run wp_x", 5.0)
    assert (type(said).__name__, said.exit_code) == ("DiskFull", 75)
    assert said.message.startswith("disk full: cannot write run wp_x")
    assert str(tmp_path) in said.message


def test_a_full_disk_on_the_postgres_server_is_75_too() -> None:
    import psycopg

    from waypost.store.postgres.live import wrapped

    said = wrapped(psycopg.errors.DiskFull("could not extend file: No space left on device"),
                   "write run wp_x", "the PostgreSQL store at db")
    assert (type(said).__name__, said.exit_code) == ("DiskFull", 75)
    assert said.message.startswith("disk full: cannot write run wp_x")


# --- item: store paths no user may use -----------------------------------------------------


@pytest.mark.parametrize("verb", [["ls"], ["show", "wp_x"], ["heartbeat", "wp_x"],
                                  ["doctor"], ["init"]])
def test_a_store_path_holding_nul_is_bad_input(verb: list[str]) -> None:
    code, out, err = call("unused", *verb, "--store", "store\x00.db", "--json")
    assert code == 2, err
    said = json.loads(out)["checks"][0] if verb == ["doctor"] else json.loads(err)["error"]
    assert "NUL" in said["message" if "message" in said else "detail"]


def _unprivileged() -> list[str]:
    """A prefix that runs a command without the power to read what its mode forbids: as
    root, without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (the same user, so the same
    interpreter); any other user already has no such power."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        if IN_CI:
            pytest.fail("CI must run the permission test: setpriv is missing")
        pytest.skip("root without setpriv cannot drop the capability to read anything")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.mark.parametrize("locked", ["folder", "file"])
def test_ls_by_a_user_who_cannot_read_the_store_exits_4_naming_it(
        tmp_path: Path, locked: str) -> None:
    store = tmp_path / ".waypost" / "waypost.db"
    populate(str(store))
    shut = store.parent if locked == "folder" else store
    shut.chmod(0)
    try:
        ls, doctor = (subprocess.run([*_unprivileged(), sys.executable, "-m", "waypost", *verb],
                                     cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                     check=False, env={**os.environ, "WAYPOST_URL": ""})
                      for verb in (["ls"], ["doctor", "--store", str(store)]))
    finally:
        shut.chmod(0o755 if locked == "folder" else 0o644)
    assert ls.returncode == 4, ls.stderr
    assert "permission denied" in ls.stderr
    assert str(store) in ls.stderr
    assert doctor.returncode == 1, doctor.stderr  # doctor's own code: a check failed
    assert f"permission denied: this user may not read {store}" in doctor.stdout


# --- the campaign --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A populated store, checkpointed into its one file, to copy for each example."""
    path = tmp_path_factory.mktemp("template") / "w.db"
    moving, blocked = populate(str(path))
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path, moving, blocked


damage = st.one_of(
    st.tuples(st.just("bytes"), st.floats(0.02, 1.0), st.integers(1, 512), st.integers()),
    st.tuples(st.just("truncate"), st.floats(0.0, 0.98), st.just(0), st.just(0)),
    st.tuples(st.just("zero_page"), st.floats(0.0, 1.0), st.just(0), st.just(0)),
    st.tuples(st.just("edit_event"), st.one_of(st.just(1.0), st.floats(0.0, 1.0)),  # 1: head
              st.integers(0, 1), st.integers()),
)


def _damage(path: Path, runs: tuple[str, str], how: tuple[str, float, int, int]) -> None:
    kind, where, size, seed = how
    total = path.stat().st_size
    if kind == "edit_event":
        run = runs[size]
        with contextlib.closing(sqlite3.connect(path)) as db:
            (count,) = db.execute("SELECT count(*) FROM events WHERE run_id = ?",
                                  (run,)).fetchone()
        edit_event(str(path), run, seq=1 + int(where * (count - 1)))
        return
    with path.open("r+b") as f:
        if kind == "truncate":
            f.truncate(int(total * where))
        elif kind == "zero_page":
            page = int(where * (total // 4096 - 1))
            f.seek(page * 4096)
            f.write(bytes(4096))
        else:
            f.seek(min(int(total * where), total - 1))
            f.write(random.Random(seed).randbytes(size))


def _sound_links(path: Path, run: str, after: int) -> None:
    """Every event past seq `after` chains onto a predecessor that hashes to its link."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT seq, body FROM events WHERE run_id = ? AND seq >= ?"
                          " ORDER BY seq", (run, after)).fetchall()
    events = [from_json(body, Event) for _, body in rows]
    for older, newer in itertools.pairwise(events):
        recomputed = event_hash(prev_hash=older.prev_hash, run_id=older.run_id, seq=older.seq,
                                at=older.at, actor=older.actor, epoch=older.epoch,
                                data=older.data)
        assert newer.prev_hash == recomputed, f"{run} seq {newer.seq} sealed a damaged head"


def _versions(path: Path, runs: tuple[str, str]) -> dict[str, int] | None:
    try:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return {run: db.execute("SELECT max(seq) FROM events WHERE run_id = ?",
                                    (run,)).fetchone()[0] for run in runs}
    except (sqlite3.Error, ValueError):  # a damaged page, or schema text that is not UTF-8
        return None


@pytest.mark.parametrize("edit", [
    "UPDATE sqlite_master SET sql = replace(sql, 'lease_owner', 'lease_ownxr')"
    " WHERE name = 'deliveries'",  # a column renamed under waypost's statements
    "UPDATE sqlite_master SET sql = sql || CAST(X'D8' AS TEXT) WHERE name = 'runs'",
])  # text the driver cannot decode, in the schema it reads on opening
def test_a_damaged_schema_is_damage_never_a_bug(template: tuple[Path, str, str],
                                                tmp_path: Path, edit: str) -> None:
    source, moving, blocked = template
    path = tmp_path / "w.db"
    shutil.copy(source, path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA writable_schema = ON")
        db.execute(edit)
    for verb in [("heartbeat", moving, "--note", "x"), ("show", moving), ("ls",),
                 ("unblock", blocked, "b1", "--resolution", "fine"), ("verify",)]:
        code, _, err = call(str(path), *verb, "--json", actor="w1")
        assert code in DOCUMENTED, f"{verb} → {code}: {err}"
        if code:
            assert json.loads(err)["error"]["code"] in ("integrity", "not_found"), err


@settings(max_examples=1000 if LONG else 60, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(how=damage)
def test_every_verb_on_a_damaged_store_exits_as_documented(
        template: tuple[Path, str, str], tmp_path: Path, how: tuple[str, float, int, int],
) -> None:
    source, moving, blocked = template
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / "w.db"
    shutil.copy(source, path)
    _damage(path, (moving, blocked), how)
    note(f"damage: {how}")
    url = str(path)
    before = _versions(path, (moving, blocked))
    verbs = [("heartbeat", moving, "--note", "on top"), ("show", moving), ("ls",),
             ("block", moving, "--kind", "other", "--detail", "more"),
             ("unblock", blocked, "b1", "--resolution", "fine"), ("verify",), ("doctor",)]
    for verb in verbs:
        code, _, err = call(url, *verb, "--json", actor="w1")
        event(f"{how[0]}: {verb[0]} → {code}")
        allowed = DOCUMENTED | ({1} if verb[0] == "doctor" else set())
        assert code in allowed, f"{verb} → {code}: {err}"
        if code and verb[0] != "doctor":
            assert "error" in json.loads(err), err
    after = _versions(path, (moving, blocked))
    if before is None or after is None:
        return  # the file does not read: no write could have gone in either
    for run in (moving, blocked):
        if after[run] is not None and before[run] is not None and after[run] > before[run]:
            _sound_links(path, run, before[run])


@settings(max_examples=60 if LONG else 4, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 1), where=st.floats(0.0, 1.0))
def test_an_edited_event_on_postgres_takes_no_write_on_its_head(which: int,
                                                                where: float) -> None:
    with pg.fresh_schema() as url:
        runs = populate(url)
        with open_store(url) as store:
            count = len(store.events(runs[which]))
        seq = edit_event(url, runs[which], seq=1 + int(where * (count - 1)))
        note(f"edited {runs[which]} seq {seq} of {count}")
        for verb in [("heartbeat", runs[which], "--note", "on top"), ("show", runs[which]),
                     ("ls",), ("unblock", runs[1], "b1", "--resolution", "fine"),
                     ("verify",), ("doctor",)]:
            code, _, err = call(url, *verb, "--json", actor="w1")
            allowed = DOCUMENTED | ({1} if verb[0] == "doctor" else set())
            assert code in allowed, f"{verb} → {code}: {err}"
            if verb[0] in WRITES and runs[which] in verb and seq == count:
                assert code == 3, f"{verb} wrote on an edited head"
            if verb[0] in ("verify", "doctor"):
                assert code != 0, f"{verb} missed the edited event"
