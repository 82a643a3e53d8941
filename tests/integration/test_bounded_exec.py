"""Commands run within bounds: their output is capped (the end kept, the total counted),
the timeout stops the command's whole process group, and nothing it leaves behind keeps
`evidence run`, the `command:` check or the runner waiting. Each call has a hang guard."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounded_support import GUARD, evidence, finishes, gone, started_run, waypost
from waypost.errors import InvalidInput
from waypost.store import open_store
from waypost.system.process import Tail, run_bounded

WRITE_3MB = "import sys; sys.stdout.buffer.write(b'x' * 3_000_000 + b'THE END')"


@pytest.fixture
def run(tmp_path: Path) -> str:
    return started_run(tmp_path)


def limits(folder: Path, **values: object) -> None:
    lines = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in values.items())
    (folder / "waypost.toml").write_text(f"[limits]\n{lines}")


def stored_log(folder: Path, found: dict[str, object]) -> bytes:
    with open_store(str(folder / ".waypost" / "waypost.db")) as store:
        return store.get_blob(str(found["log_sha256"]))


def test_large_output_keeps_its_end_and_says_how_much_there_was(tmp_path: Path, run: str) -> None:
    limits(tmp_path, max_output_bytes=65536)
    found = evidence(waypost(tmp_path, "evidence", "run", run, "--json", "--",
                             sys.executable, "-c", WRITE_3MB))
    assert found["verdict"] == "passed"
    assert "output truncated: 3000007 bytes, kept the last 64 KB" in found["summary"]
    log = stored_log(tmp_path, found)
    assert len(log) == 65536
    assert log.endswith(b"THE END")


def test_yes_is_capped_and_stopped_at_the_timeout(tmp_path: Path, run: str) -> None:
    limits(tmp_path, max_output_bytes=1_000_000)
    found = evidence(waypost(tmp_path, "evidence", "run", run, "--json", "--timeout", "1s",
                             "--", "yes"))
    assert found["verdict"] == "failed"
    assert found["exit_code"] is None
    assert "killed after 1s (timeout)" in found["summary"]
    assert "output truncated" in found["summary"]
    assert stored_log(tmp_path, found) == b"y\n" * 500_000


def test_a_background_child_neither_holds_the_command_nor_outlives_it(
        tmp_path: Path, run: str) -> None:
    """The timeout is longer than the hang guard: only the command's own exit may end it."""
    found = evidence(waypost(tmp_path, "evidence", "run", run, "--json", "--timeout", "60s",
                             "--", "sh", "-c", "sleep 40 & echo $! > bg.pid; echo started"))
    assert (found["verdict"], found["exit_code"]) == ("passed", 0)
    assert found["output_tail"] == "started\n"
    assert gone(int((tmp_path / "bg.pid").read_text()))


def test_the_timeout_kills_the_whole_group(tmp_path: Path, run: str) -> None:
    found = evidence(waypost(tmp_path, "evidence", "run", run, "--json", "--timeout", "1s",
                             "--", "sh", "-c", "sleep 40 & echo $! > bg.pid; sleep 40"))
    assert (found["verdict"], found["exit_code"]) == ("failed", None)
    assert "killed after 1s (timeout)" in found["summary"]
    assert gone(int((tmp_path / "bg.pid").read_text()))


def test_the_command_check_is_bounded_the_same_way(tmp_path: Path, run: str) -> None:
    limits(tmp_path, evidence_timeout="2s")
    found = evidence(waypost(tmp_path, "evidence", "check", run, "--json",
                             "command:sh -c 'sleep 40 & echo $! > bg.pid; sleep 40'"))
    assert (found["verdict"], found["exit_code"]) == ("failed", None)
    assert "(timeout)" in found["summary"]
    assert gone(int((tmp_path / "bg.pid").read_text()))


def test_a_process_that_left_the_group_is_not_waited_for(tmp_path: Path) -> None:
    """`setsid` puts it out of the group's reach; it still holds the output pipe open."""
    script = "setsid sleep 40 & echo $! > bg.pid; echo started"
    try:
        done = finishes(lambda: run_bounded(["sh", "-c", script], timeout=3 * GUARD,
                                            max_output=100, cwd=str(tmp_path)))
        assert (done.exit_code, done.timed_out, done.output) == (0, False, b"started\n")
    finally:
        pid = int((tmp_path / "bg.pid").read_text())
        if not gone(pid, within=0):
            os.kill(pid, signal.SIGKILL)


def test_the_runner_feeds_stdin_and_reports_the_exit_code() -> None:
    done = finishes(lambda: run_bounded(["sh", "-c", "cat; exit 3"], timeout=20,
                                        max_output=100, stdin=b"the document\n"))
    assert (done.exit_code, done.output, done.total_bytes) == (3, b"the document\n", 13)
    assert not done.truncated


def test_input_the_command_does_not_read_cannot_block_it() -> None:
    done = finishes(lambda: run_bounded(["true"], timeout=20, max_output=100,
                                        stdin=b"x" * 10_000_000))
    assert (done.exit_code, done.timed_out) == (0, False)


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
def test_a_timeout_must_be_a_positive_finite_number(timeout: float) -> None:
    with pytest.raises(InvalidInput, match="positive number of seconds"):
        run_bounded(["true"], timeout=timeout, max_output=100)


def test_a_command_that_cannot_start_is_exit_127(tmp_path: Path, run: str) -> None:
    found = evidence(waypost(tmp_path, "evidence", "run", run, "--json", "--",
                             "no-such-command-here"))
    assert (found["verdict"], found["exit_code"]) == ("failed", 127)
    assert "cannot run 'no-such-command-here'" in found["output_tail"]


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=40),
       limit=st.integers(min_value=0, max_value=100))
def test_the_tail_is_exactly_the_end(chunks: list[bytes], limit: int) -> None:
    kept = Tail(limit)
    for chunk in chunks:
        kept.add(chunk)
        assert len(kept.kept) <= 2 * limit + len(chunk)  # memory stays bounded
    everything = b"".join(chunks)
    assert kept.value() == (everything[-limit:] if limit else b"")
    assert kept.total == len(everything)


@settings(max_examples=10, deadline=None)
@given(size=st.integers(min_value=0, max_value=2_000_000),
       limit=st.integers(min_value=0, max_value=300_000))
def test_a_command_keeps_exactly_the_end_of_its_output(size: int, limit: int) -> None:
    data = b"".join(b"%d\n" % i for i in range(size // 4 + 1))[:size]
    done = run_bounded(["cat"], timeout=GUARD, max_output=limit, stdin=data)
    assert done.output == (data[-limit:] if limit else b"")
    assert (done.total_bytes, done.truncated) == (len(data), len(data) > limit)
