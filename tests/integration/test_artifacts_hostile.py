"""`artifact add` and `artifact get` against hostile input: a refusal stores nothing, a fetch
never writes through a device, FIFO or link nor over a file unless forced, a size limit is
counted, not believed, and a failed write leaves no temporary file behind."""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Cli, FakeClock
from waypost.core.history import prepare
from waypost.durations import utcnow
from waypost.errors import (
    IllegalTransition,
    NotFound,
    RuleViolation,
    StaleLease,
    WaypostError,
)
from waypost.events import ArtifactRecorded
from waypost.model import Artifact, ArtifactRole, Authority, Kind
from waypost.store import Store, open_store
from waypost.usecases import artifacts, runs, starting

BODY = b"# Report\n\nThe change is done and tested.\n"
Dump = tuple[list[tuple[str, int]], list[tuple[str, int, str]], list[tuple[str, int, str]]]


@pytest.fixture
def run(cli: Cli, tmp_path: Path) -> str:
    """A long-running run worked by w1 (epoch 1), with report.md on disk and recorded."""
    cli.ok("init")
    run_id = cli.ok("start", "Write the report", "--owner", "alice", "--kind",
                    "long_running", "--target", "none:", "--max-silence", "30m")
    cli.ok("claim", run_id, actor="w1")
    (tmp_path / "report.md").write_bytes(BODY)
    cli.ok("artifact", "add", run_id, "report.md", "--role", "report", actor="w1")
    return run_id


def dump(cli: Cli) -> Dump:
    """What a refusal must leave unchanged: the blobs, the events and the runs' versions."""
    db = sqlite3.connect(cli.store)
    try:
        return (db.execute("SELECT sha256, size FROM blobs ORDER BY sha256").fetchall(),
                db.execute("SELECT run_id, seq, body FROM events ORDER BY run_id, seq")
                .fetchall(),
                db.execute("SELECT id, version, head_hash FROM runs ORDER BY id").fetchall())
    finally:
        db.close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def record_legacy(cli: Cli, run_id: str, name: str, data: bytes) -> None:
    """An artifact recorded under older rules (a name they allowed and today's refuse),
    committed as an event through the library, as an old release did."""
    with open_store(str(cli.store)) as store:
        at = utcnow()
        artifact = Artifact(name=name, role=ArtifactRole.OTHER, path=name,
                            sha256=store.put_blob(data), bytes=len(data), stored=True,
                            recorded_at=at, recorded_by="w1")
        store.commit_write(prepare(store.load(run_id), [(ArtifactRecorded(artifact=artifact),
                                                         1)], actor="w1", at=at))


# --- get: where it writes ---------------------------------------------------------------


@pytest.mark.parametrize(("device", "numbers"), [("/dev/null", (1, 3)), ("/dev/full", (1, 7))])
def test_get_never_replaces_a_device(cli: Cli, run: str, tmp_path: Path, device: str,
                                     numbers: tuple[int, int]) -> None:
    """As root, a broken build would replace the host's own node, so root gets a node of
    the same device made here (a non-root user cannot replace /dev/null)."""
    if os.geteuid() == 0:
        device = str(tmp_path / Path(device).name)
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(*numbers))
    for extra in ((), ("--force",)):
        outcome = cli("artifact", "get", run, "report.md", "-o", device, *extra)
        assert outcome.code == 2, outcome.err
        assert "character device" in outcome.err
        assert "-o -" in outcome.err
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert leftovers(Path(device).parent) == []


def test_get_never_writes_into_a_fifo(cli: Cli, run: str, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for extra in ((), ("--force",)):
        outcome = cli("artifact", "get", run, "report.md", "-o", str(fifo), *extra)
        assert outcome.code == 2, outcome.err
        assert "FIFO" in outcome.err
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_get_never_writes_through_a_symlink(cli: Cli, run: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link"
    link.symlink_to(victim)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "report.md").symlink_to(victim)  # planted where `-o out` would write
    for output in (str(link), str(folder)):
        for extra in ((), ("--force",)):
            outcome = cli("artifact", "get", run, "report.md", "-o", output, *extra)
            assert outcome.code == 2, (output, extra, outcome.err)
            assert "symbolic link" in outcome.err
    assert victim.read_text() == "keep me\n"
    assert link.is_symlink()
    assert (folder / "report.md").is_symlink()
    assert leftovers(tmp_path) == leftovers(folder) == []


def test_get_refuses_to_overwrite_unless_forced(cli: Cli, run: str, tmp_path: Path) -> None:
    existing = tmp_path / "existing.md"
    existing.write_text("mine\n")
    refused = cli("artifact", "get", run, "report.md", "-o", str(existing), "--json")
    assert refused.code == 5
    assert refused.error()["code"] == "conflict"
    assert "--force" in refused.error()["hint"]
    assert existing.read_text() == "mine\n"
    cli.ok("artifact", "get", run, "report.md", "-o", str(existing), "--force")
    assert existing.read_bytes() == BODY
    assert leftovers(tmp_path) == []


def test_get_into_the_current_directory_refuses_an_existing_file(
        cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("edited since\n")
    assert cli("artifact", "get", run, "report.md").code == 5
    assert (tmp_path / "report.md").read_text() == "edited since\n"
    (tmp_path / "report.md").unlink()
    assert cli.ok("artifact", "get", run, "report.md") == str(tmp_path / "report.md")
    assert (tmp_path / "report.md").read_bytes() == BODY


def test_get_to_stdout_streams_the_bytes(cli: Cli, run: str) -> None:
    outcome = cli("artifact", "get", run, "report.md", "-o", "-")
    assert (outcome.code, outcome.out) == (0, BODY.decode())


def test_get_into_a_missing_directory_is_not_found(cli: Cli, run: str, tmp_path: Path) -> None:
    outcome = cli("artifact", "get", run, "report.md", "-o", str(tmp_path / "missing/dir/x"),
                  "--json")
    assert outcome.code == 4, outcome.err
    assert "no directory" in outcome.error()["message"]
    assert "mkdir -p" in outcome.error()["hint"]
    assert cli("artifact", "get", run, "report.md", "-o", "missing/").code == 4
    assert not (tmp_path / "missing").exists()


def test_get_into_a_directory_it_cannot_write_is_bad_input(
        cli: Cli, run: str, tmp_path: Path) -> None:
    places = []
    if os.geteuid() != 0:  # root writes anywhere: a mode cannot refuse it
        closed = tmp_path / "closed"
        closed.mkdir(mode=0o500)
        places.append(closed / "x")
    if Path("/sys/kernel").is_dir():  # sysfs refuses new files even to root
        places.append(Path("/sys/kernel/waypost-test-x"))
    if not places:
        pytest.skip("no directory here refuses a write")
    for place in places:
        outcome = cli("artifact", "get", run, "report.md", "-o", str(place), "--json")
        assert outcome.code == 2, (place, outcome.err)
        assert str(place) in outcome.error()["message"]


@pytest.mark.parametrize("force", [False, True])
def test_what_appears_at_the_target_while_writing_is_not_replaced(
        cli: Cli, run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        force: bool) -> None:
    """Between the check and the rename, another process plants a file (or, against
    --force, a link) where the artifact goes: it is refused, and left as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "out.md"
    write_temp = artifacts._write_temp

    def planting(where: Path, data: bytes) -> Path:
        tmp = write_temp(where, data)
        if force:
            target.symlink_to(victim)
        else:
            target.write_text("planted\n")
        return tmp

    monkeypatch.setattr(artifacts, "_write_temp", planting)
    outcome = cli("artifact", "get", run, "report.md", "-o", str(target),
                  *(("--force",) if force else ()))
    assert outcome.code == (2 if force else 5), outcome.err
    assert target.is_symlink() if force else target.read_text() == "planted\n"
    assert victim.read_text() == "keep me\n"
    assert leftovers(tmp_path) == []


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".bashrc", "-o", "--force", "..", "a/b", "report.md\n",
                                  "trailing ", "", "x\x1b]52;c;aGk=\x07"])
def test_add_refuses_hidden_option_like_and_unplain_names_and_stores_nothing(
        cli: Cli, run: str, tmp_path: Path, name: str) -> None:
    (tmp_path / "fresh.md").write_bytes(b"fresh bytes for " + name.encode())
    before = dump(cli)
    outcome = cli("artifact", "add", run, "fresh.md", "--name", name, "--json", actor="w1")
    assert outcome.code == 2, outcome.err
    assert "--name" in outcome.error()["hint"]
    assert dump(cli) == before


def test_add_refuses_a_hidden_file_under_its_own_name(cli: Cli, run: str,
                                                      tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A=1\n")
    outcome = cli("artifact", "add", run, ".env", "--json", actor="w1")
    assert outcome.code == 2
    assert outcome.error()["hint"] == "pass --name env"
    cli.ok("artifact", "add", run, ".env", "--name", "env", actor="w1")


def test_a_legacy_hidden_name_stays_readable_but_is_never_written_under_that_name(
        cli: Cli, run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record_legacy(cli, run, ".bashrc", b"alias ls='rm -rf'\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    monkeypatch.chdir(home)
    for extra in ((), ("--force",)):
        refused = cli("artifact", "get", run, ".bashrc", "--json", *extra)
        assert refused.code == 2, refused.err
        assert "-o bashrc -- .bashrc" in refused.error()["hint"]
        assert cli("artifact", "get", run, ".bashrc", "-o", str(home), *extra).code == 2
    assert (home / ".bashrc").read_text() == "# mine\n"
    cli.ok("artifact", "get", run, ".bashrc", "-o", "somefile")
    assert (home / "somefile").read_bytes() == b"alias ls='rm -rf'\n"
    assert cli("show", run, "--json").json()["artifacts"][-1]["name"] == ".bashrc"
    assert cli.ok("verify") == "ok: 1 run(s) verified"


# --- the resume brief quotes what it prints ---------------------------------------------


def test_the_brief_quotes_every_fetch_command(cli: Cli, run: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    spaced = "x -o y"
    (tmp_path / "notes.txt").write_bytes(b"spaced name\n")
    cli.ok("artifact", "add", run, "notes.txt", "--name", spaced, actor="w1")
    record_legacy(cli, run, "-o .bashrc", b"legacy option-like\n")
    cli.ok("transfer", run, "--authority", "takeover", "--to", "w2", actor="alice")
    brief = cli("resume", run, "--json", actor="w2").json()
    fetch = {a["name"]: a["fetch"] for a in brief["artifacts"]}
    assert shlex.split(fetch[spaced]) == ["waypost", "artifact", "get", run, spaced]
    assert fetch[spaced] in cli.ok("resume", run, actor="w2")
    legacy = shlex.split(fetch["-o .bashrc"])
    assert legacy == ["waypost", "artifact", "get", run, "-o", "o .bashrc", "--", "-o .bashrc"]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.chdir(fresh)
    for command in fetch.values():  # pasted as printed: each writes only its own file
        cli.ok(*shlex.split(command)[1:], actor="w2")
    assert sorted(p.name for p in fresh.iterdir()) == ["o .bashrc", "report.md", spaced]
    assert (fresh / spaced).read_bytes() == b"spaced name\n"
    assert (fresh / "o .bashrc").read_bytes() == b"legacy option-like\n"


def test_the_brief_quotes_the_actor_in_every_next_step(cli: Cli, run: str) -> None:
    cli.ok("transfer", run, "--authority", "takeover", "--to", "ops bot", actor="alice")
    brief = cli("resume", run, "--json", actor="ops bot").json()
    for step in brief["next_steps"]:
        words = shlex.split(step.split("   (")[0])
        assert words[words.index("--as") + 1] == "ops bot", step


# --- add: nothing stored until the write is decided -------------------------------------


def test_refused_adds_store_no_blob(cli: Cli, run: str, tmp_path: Path) -> None:
    other = cli.ok("start", "Cancelled one", "--owner", "alice", "--kind", "long_running",
                   "--target", "none:", "--max-silence", "30m")
    cli.ok("claim", other, actor="w1")
    cli.ok("cancel", other, "--reason", "not needed")
    cli.ok("transfer", run, "--authority", "takeover", "--to", "w2", actor="alice")
    cli.ok("claim", run, actor="w2")  # w1 (epoch 1) is now a stale worker
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 1000\n")
    (tmp_path / "big.bin").write_bytes(os.urandom(1001))
    refusals = [  # (why, run, actor, epoch, source, exit code)
        ("missing run", "wp_nope", "w2", None, "payload.md", 4),
        ("stale worker", run, "w1", 1, "payload.md", 3),
        ("not the worker", run, "mallory", None, "payload.md", 3),
        ("cancelled run", other, "alice", None, "payload.md", 3),
        ("too big", run, "w2", 2, "big.bin", 3),
        ("zero-reported size", run, "w2", 2, "/proc/self/status", 3),
    ]
    for why, run_id, actor, epoch, source, code in refusals:
        (tmp_path / "payload.md").write_bytes(f"unique payload for {why}\n".encode())
        before = dump(cli)
        outcome = cli("artifact", "add", run_id, source, actor=actor, epoch=epoch)
        assert outcome.code == code, (why, outcome.err)
        assert dump(cli) == before, why


def test_run_add_artifact_stores_no_blob_on_refusal_on_every_backend(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=1800, clock=clock)
    runs.Run(store, run.id, actor="w1", clock=clock).claim()
    stale = runs.Run(store, run.id, actor="w1", epoch=1, clock=clock)
    run.transfer(Authority.TAKEOVER, "w2")
    runs.Run(store, run.id, actor="w2", clock=clock).claim()
    cancelled, _ = starting.start(store, "c", actor="alice", target="none:",
                              kind=Kind.LONG_RUNNING, max_silence=1800, clock=clock)
    cancelled.cancel("not needed")
    payload = tmp_path / "payload.md"
    refusals: list[tuple[runs.Run, int, type[WaypostError]]] = [
        (runs.Run(store, "wp_nope", actor="w2", clock=clock), 10**6, NotFound),
        (stale, 10**6, StaleLease),
        (runs.Run(store, run.id, actor="mallory", clock=clock), 10**6, StaleLease),
        (runs.Run(store, cancelled.id, actor="alice", clock=clock), 10**6, IllegalTransition),
        (runs.Run(store, run.id, actor="w2", epoch=2, clock=clock), 10, RuleViolation),
    ]
    for handle, limit, refusal in refusals:
        payload.write_bytes(f"unique payload for {handle!r} {limit}\n".encode())
        with pytest.raises(refusal):
            handle.add_artifact(str(payload), role=ArtifactRole.REPORT, max_bytes=limit)
        with pytest.raises(NotFound):
            store.get_blob(hashlib.sha256(payload.read_bytes()).hexdigest())
    assert store.get(run.id).artifacts == ()


def test_a_file_reporting_zero_bytes_is_counted_against_the_limit(
        cli: Cli, run: str, tmp_path: Path) -> None:
    assert os.stat("/proc/self/status").st_size == 0  # it says so, and holds more than 100
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 100\n")
    outcome = cli("artifact", "add", run, "/proc/self/status", "--json", actor="w1")
    assert outcome.code == 3, outcome.err
    assert "more than 100 bytes" in outcome.error()["message"]
    assert "max_artifact_bytes" in outcome.error()["hint"]


def test_a_reported_size_above_the_limit_is_refused_before_anything_is_read(
        cli: Cli, run: str, tmp_path: Path) -> None:
    """The size is decided before the rules: a sparse 1 GB file added to a run that does not
    exist is refused for its size, and not a byte of it is read."""
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 1000\n")
    with open(tmp_path / "sparse.bin", "wb") as fh:
        fh.truncate(1 << 30)
    outcome = cli("artifact", "add", "wp_nope", "sparse.bin", "--json", actor="w1")
    assert outcome.code == 3, outcome.err
    assert outcome.error()["message"].startswith(f"sparse.bin is {1 << 30} bytes, above the "
                                                 "artifact limit of 1000 bytes")


def test_a_file_of_exactly_the_limit_is_recorded(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 100\n")
    (tmp_path / "exact.bin").write_bytes(b"x" * 100)
    cli.ok("artifact", "add", run, "exact.bin", actor="w1")
    (tmp_path / "over.bin").write_bytes(b"x" * 101)
    assert cli("artifact", "add", run, "over.bin", actor="w1").code == 3
    assert cli("artifact", "add", "wp_nope", "over.bin", actor="w1").code == 3  # size first


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_add_reads_only_regular_files_and_never_waits(
        cli: Cli, run: str, tmp_path: Path, kind: str) -> None:
    source = {"fifo": tmp_path / "pipe", "device": Path("/dev/zero"),
              "directory": tmp_path / "folder"}[kind]
    if kind == "fifo":
        os.mkfifo(source)  # nobody ever writes it: opening it to read would wait forever
    elif kind == "directory":
        source.mkdir()
    before = dump(cli)
    outcome = cli("artifact", "add", run, str(source), "--name", "x.bin", "--json",
                  actor="w1")
    assert outcome.code == 2, outcome.err
    assert "not a regular file" in outcome.error()["message"]
    assert dump(cli) == before


def test_a_url_with_spaces_is_refused(cli: Cli, run: str) -> None:
    outcome = cli("artifact", "add", run, "https://example.invalid/a b -o .bashrc",
                  actor="w1")
    assert outcome.code == 2


# --- a failed write leaves nothing behind -----------------------------------------------


def _waypost(*args: str) -> list[str]:
    return [sys.executable, "-m", "waypost", *args]


def test_a_write_that_fails_midway_leaves_no_temporary_file(
        cli: Cli, run: str, tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE; Python ignores SIGXFSZ) makes the write itself fail
    after some bytes are on disk, as a full disk does."""
    (tmp_path / "big.bin").write_bytes(os.urandom(1 << 20))
    cli.ok("artifact", "add", run, "big.bin", actor="w1")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        ["sh", "-c", 'ulimit -f 128 && exec "$@"', "sh",
         *_waypost("artifact", "get", run, "big.bin", "-o", str(out), "--store",
                   str(cli.store))],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "File too large" in proc.stderr
    assert str(out / "big.bin") in proc.stderr
    assert list(out.iterdir()) == []


def test_a_failed_rename_leaves_no_temporary_file(
        cli: Cli, run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step failing (an I/O error as the file is put in place) still cleans up."""
    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    out = tmp_path / "out"
    out.mkdir()
    for call in ("link", "rename", "replace"):
        monkeypatch.setattr(os, call, failing)
    for extra in ((), ("--force",)):
        outcome = cli("artifact", "get", run, "report.md", "-o", str(out), *extra)
        assert outcome.code == 1
        assert f"cannot write {out / 'report.md'}: Input/output error" in outcome.err
        assert list(out.iterdir()) == []


def test_a_file_system_without_hard_links_still_gets_the_file(
        cli: Cli, run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "link", unsupported)
    cli.ok("artifact", "get", run, "report.md", "-o", "copy.md")
    assert (tmp_path / "copy.md").read_bytes() == BODY
    assert cli("artifact", "get", run, "report.md", "-o", "copy.md").code == 5
    assert leftovers(tmp_path) == []


def _user_namespaces() -> bool:
    try:
        probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                               capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def test_a_full_disk_says_so_and_leaves_no_temporary_file(
        cli: Cli, run: str, tmp_path: Path) -> None:
    """A real ENOSPC: a 64 KB tmpfs mounted in a private user and mount namespace."""
    if not _user_namespaces():
        pytest.skip("unprivileged user namespaces are not available here")
    (tmp_path / "big.bin").write_bytes(os.urandom(256 * 1024))
    cli.ok("artifact", "add", run, "big.bin", actor="w1")
    small = tmp_path / "small"
    small.mkdir()
    script = ('mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; shift; "$@"; '
              'echo "exit=$?"; ls -A "$OUT"')
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
         str(small), *_waypost("artifact", "get", run, "big.bin", "-o", str(small),
                               "--store", str(cli.store))],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "OUT": str(small)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["exit=75"]  # and the tmpfs held no file at all
    assert f"disk full: cannot write {small / 'big.bin'}" in proc.stderr
