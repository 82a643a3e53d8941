"""`waypost wait` as a process: it returns once another process's write makes the run need
the parent (both backends), prints each packet's one-line status or, with --json, the
packets, and says how the wait ended in its exit code: 0 reached, 75 timed out, 6 ended
otherwise, 4 an unknown run (before any waiting). Timeouts are hang guards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg
from tests.helpers import claimed_run
from waypost.model import BlockerKind
from waypost.store import open_store
from waypost.usecases import runs

GUARD = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with pg.each_backend(request.param, tmp_path) as found:
        yield found


def _claimed(url: str) -> tuple[str, int]:
    with open_store(url) as store:
        return claimed_run(store)


def _wait(url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "WAYPOST_URL": url, "WAYPOST_ACTOR": "alice"}
    return subprocess.Popen([sys.executable, "-m", "waypost", "wait", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _ran(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=GUARD + 10)
    return proc.returncode, out, err


def test_wait_returns_after_another_process_blocks_on_the_owner(url: str) -> None:
    run, epoch = _claimed(url)
    proc = _wait(url, run, "--timeout", f"{GUARD}s", "--json")
    time.sleep(1.0)  # the waiter is (most likely) waiting by now; either way it must see it
    assert proc.poll() is None, "returned before anything needed the parent"
    with open_store(url) as store:
        runs.Run(store, run, actor="w1", epoch=epoch).block(BlockerKind.MISSING_INPUT,
                                                            "the API key")
    changed = time.monotonic()
    code, out, err = _ran(proc)
    assert time.monotonic() < changed + GUARD
    assert code == 0, err
    document = json.loads(out)
    assert document["outcome"] == "reached"
    assert document["outcomes"] == {run: "reached"}
    [packet] = document["runs"]
    assert (packet["id"], packet["state"]) == (run, "blocked")
    assert packet["blockers"][0]["kind"] == "missing_input"


def test_wait_prints_one_line_per_run_and_exits_75_on_timeout(url: str) -> None:
    run, _ = _claimed(url)
    other, _ = _claimed(url)
    code, out, err = _ran(_wait(url, run, other, "--timeout", "0.5s"))
    assert code == 75, err
    lines = out.splitlines()
    assert [line.split()[:3] for line in lines] == [[run, "in_progress", "(timed_out)"],
                                                   [other, "in_progress", "(timed_out)"]]


def test_wait_exits_6_when_the_run_ended_in_a_state_not_waited_for(url: str) -> None:
    run, _ = _claimed(url)
    with open_store(url) as store:
        runs.Run(store, run, actor="alice").cancel("not needed")
    code, out, err = _ran(_wait(url, run, "--until", "ready_for_review", "--timeout", "30s"))
    assert code == 6, err
    assert out.split()[:3] == [run, "cancelled", "(ended)"]


def test_wait_for_an_unknown_run_exits_4_before_waiting(url: str) -> None:
    run, _ = _claimed(url)
    started = time.monotonic()
    code, out, err = _ran(_wait(url, run, "wp_nosuchrun", "--timeout", f"{GUARD}s", "--json"))
    assert code == 4, err
    assert time.monotonic() < started + GUARD
    assert json.loads(err)["error"]["code"] == "not_found"
    assert out == ""


def test_wait_refuses_bad_input_with_exit_2(url: str) -> None:
    run, _ = _claimed(url)
    for args in (["--until", "finished"], ["--timeout", "2d"], ["--timeout", "soon"]):
        code, _, err = _ran(_wait(url, run, *args))
        assert code == 2, (args, err)
