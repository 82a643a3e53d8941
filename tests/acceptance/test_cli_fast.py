"""The hot verbs' fast path answers exactly as click does.

Every case runs twice, as real processes, against twin copies of one store: once as
`python -m waypost` (the fast path, wherever it understands the command line) and once
through click alone (`main(fast=False)`). Exit code, stdout and stderr must match, times
aside; and click must be loaded in the first process exactly when the fast path is
expected to hand the command line over (or to hand click some output to print).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple, NoReturn, TextIO

import click
import pytest

import waypost
from tests.acceptance.test_imports import importtime_modules
from tests.helpers import Cli
from waypost.cli import context, hot
from waypost.usecases.runs import Run

CLICK_ONLY = "import sys; from waypost.cli import main; sys.exit(main(sys.argv[1:], fast=False))"
RUN = "{run}"
# what differs between two processes run a moment apart: times, durations, ages
MOMENTS = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?|\b\d+(\.\d+)?(ms|s|m|h|d)\b"
                     r'|"silent_for_s":[-\d.e]+')


class Step(NamedTuple):
    argv: tuple[str, ...]
    loads_click: bool = False
    env: Mapping[str, str] = {}


class Outcome(NamedTuple):
    code: int
    out: str
    err: str


def fast(*argv: str, env: Mapping[str, str] | None = None) -> Step:
    """A step the fast path runs without loading click."""
    return Step(argv, False, env or {})


def clicked(*argv: str, env: Mapping[str, str] | None = None) -> Step:
    """A step that loads click: handed over to it, or printed through it."""
    return Step(argv, True, env or {})


CASES: dict[str, tuple[Step, ...]] = {
    "heartbeat": (fast("heartbeat", RUN, "--note", "drafting", "--progress", "0.5",
                       "--epoch", "1"),),
    "--json and = forms": (fast("heartbeat", "--json", RUN, "--note=é = e", "--epoch=1"),),
    "epoch from the environment": (fast("heartbeat", RUN, env={"WAYPOST_EPOCH": "1"}),),
    "stale epoch": (fast("heartbeat", RUN, "--epoch", "7"),
                    fast("heartbeat", RUN, "--epoch", "7", "--json")),
    "not the lease holder": (fast("heartbeat", RUN, "--as", "w2"),
                             fast("block", RUN, "--kind", "other", "--detail", "x",
                                  "--as", "w2", "--json")),
    "unknown run": (fast("heartbeat", "wp_missing"), fast("heartbeat", "wp_missing", "--json"),
                    fast("show", "wp_missing"), fast("show", "wp_missing", "--json")),
    "bad store url": (fast("heartbeat", RUN, "--store", "sqlite:/w.db"),
                      fast("ls", "--store=sqlite:/w.db", "--json")),
    "no store found": (fast("ls", env={"WAYPOST_URL": ""}),),
    "show": (fast("show", RUN), fast("show", RUN, "--json"), fast("show", RUN, "--md"),
             fast("show", RUN, "--public", "--json"), fast("show", RUN, "--md", "--json")),
    "block, then show": (fast("block", RUN, "--kind", "missing_input", "--detail", "API key",
                              "--epoch", "1"),
                         fast("block", RUN, "--kind", "other", "--detail", "x", "--json"),
                         fast("show", RUN)),
    "ls": (fast("ls"), fast("ls", "--json"), fast("ls", "--all", "--limit", "1"),
           fast("ls", "--state", "blocked,in_progress", "--owner", "owner", "--state",
                "approved"),
           fast("ls", "--state", "sleeping"), fast("ls", "--state", "sleeping", "--json")),
    "usage errors": (clicked("heartbeat"), clicked("heartbeat", "--json"),
                     clicked("heartbeat", RUN, "--progress", "half"),
                     clicked("heartbeat", RUN, "--epoch", "x", "--json"),
                     clicked("heartbeat", RUN, "--epoch", "0", "--json"),
                     clicked("heartbeat", RUN, env={"WAYPOST_EPOCH": "x"}),
                     clicked("heartbeat", RUN, "--bogus"), clicked("heartbeat", RUN, "extra"),
                     clicked("heartbeat", RUN, "--note"), clicked("heartbeat", RUN, "--json=1"),
                     clicked("block", RUN, "--kind", "nope", "--detail", "x"),
                     clicked("block", RUN, "--detail", "x", "--json"),
                     clicked("ls", "--limit", "many")),
    "help": (clicked("heartbeat", RUN, "--help"), clicked("show", "-h"),
             clicked("ls", "--help")),
    "left to click, and run": (clicked("heartbeat", RUN, "--note", "-1", "--epoch", "1"),
                               clicked("heartbeat", "--epoch", "1", "--", RUN),
                               clicked("ls", "--all", "--all")),
    # a stored ANSI code is shown as text (`\x1b[31m`), so no escape is left for click
    "ANSI codes in a note": (fast("heartbeat", RUN, "--note", "\x1b[31mred\x1b[0m",
                                  "--epoch", "1"),
                             fast("show", RUN)),
    # click re-wraps an ASCII stdout as UTF-8: the fast path lets it
    "ASCII stdout": (clicked("show", RUN, env={"PYTHONIOENCODING": "ascii"}),
                     clicked("heartbeat", RUN, "--epoch", "1", "--note", "café",
                             env={"PYTHONIOENCODING": "ascii"})),
}


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two copies of one store: a claimed run with some history, and one of another owner."""
    base = tmp_path / "base.db"
    with waypost.open_store(str(base)) as store:
        run, _ = waypost.start(store, "Write the report", actor="owner", owner="owner",
                               target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=1800, worker="w1")
        worker = waypost.Run(store, run.id, actor="w1", epoch=1)
        worker.heartbeat(note="café ☕", progress=0.25)
        _, blocker = worker.block(waypost.BlockerKind.UNAVAILABLE_RESOURCE, "staging is down")
        worker.unblock(blocker, "it is back")
        worker.skip_evidence(waypost.EvidenceKind.TEST, "no CI runner")
        waypost.start(store, "Someone else's", actor="bob", target="none:")
    copies = []
    for name in ("fast", "click"):
        (tmp_path / name).mkdir()
        copies.append(Path(shutil.copy(base, tmp_path / name / "w.db")))
    return copies[0], copies[1], run.id


def spawn(command: list[str], store: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("WAYPOST_", "_WAYPOST_", "PYTHONIOENCODING"))}
    environ.update({"WAYPOST_URL": str(store), "WAYPOST_ACTOR": "w1", **env})
    return subprocess.Popen(command, cwd=store.parent, env=environ, text=True,
                            encoding="utf-8", stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[str]) -> tuple[Outcome, set[str]]:
    """The outcome with times masked, and the modules imported (from -X importtime)."""
    out, err = proc.communicate(timeout=60)
    modules = importtime_modules(err)
    err = "".join(line for line in err.splitlines(keepends=True)
                  if not line.startswith("import time:"))
    return Outcome(proc.returncode, MOMENTS.sub("<t>", out), MOMENTS.sub("<t>", err)), modules


@pytest.mark.parametrize("steps", CASES.values(), ids=list(CASES))
def test_fast_path_answers_as_click_does(twins: tuple[Path, Path, str],
                                         steps: tuple[Step, ...]) -> None:
    fast_store, click_store, run_id = twins
    for step in steps:
        argv = [part.format(run=run_id) for part in step.argv]
        first = spawn([sys.executable, "-X", "importtime", "-m", "waypost", *argv],
                      fast_store, step.env)
        second = spawn([sys.executable, "-c", CLICK_ONLY, *argv], click_store, step.env)
        (outcome, modules), (expected, _) = finish(first), finish(second)
        assert outcome == expected, argv
        assert "waypost.cli" in modules  # the importtime output was really read
        assert ("click" in modules) == step.loads_click, argv


def test_a_closed_pipe_exits_1_quietly_as_with_click(twins: tuple[Path, Path, str]) -> None:
    fast_store, click_store, _ = twins
    outcomes = []
    for store, command in ((fast_store, ["-m", "waypost"]), (click_store, ["-c", CLICK_ONLY])):
        proc = spawn([sys.executable, *command, "ls", "--json"], store, {})
        assert proc.stdout is not None
        proc.stdout.close()  # the reader goes away before anything is written
        outcomes.append((proc.wait(timeout=60), proc.communicate()[1]))
    assert outcomes[0] == outcomes[1] == (1, "")


@pytest.mark.parametrize("text", ["plain", "", "café ☕", "two\nlines", "\x1b[31mred\x1b[0m"])
@pytest.mark.parametrize("encoding", ["utf-8", "ascii", None])
def test_echo_writes_what_click_echo_writes(monkeypatch: pytest.MonkeyPatch, text: str,
                                            encoding: str | None) -> None:
    """Both paths print through `waypost.cli.echo`: it must write what click.echo would, to
    a UTF-8 stream, a misconfigured ASCII one, and one without an encoding (io.StringIO)."""

    def written(echo: Callable[..., None], *, err: bool, nl: bool) -> bytes | str:
        buffer = io.BytesIO()
        stream: TextIO = (io.StringIO() if encoding is None
                          else io.TextIOWrapper(buffer, encoding=encoding, write_through=True))
        monkeypatch.setattr(sys, "stderr" if err else "stdout", stream)
        echo(text, err=err, nl=nl)
        return stream.getvalue() if isinstance(stream, io.StringIO) else buffer.getvalue()

    for err in (False, True):
        for nl in (False, True):
            assert written(context.echo, err=err, nl=nl) == written(click.echo, err=err, nl=nl)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, EOFError])
def test_an_interrupted_verb_is_reported_as_with_click(
        cli: Cli, monkeypatch: pytest.MonkeyPatch, interrupt: type[BaseException]) -> None:
    run_id = cli.ok("start", "interrupted", "--kind", "long_running", "--target", "none:",
                    "--max-silence", "1h", "--worker", "alice")

    def interrupted(*args: object, **kwargs: object) -> NoReturn:
        raise interrupt

    monkeypatch.setattr(Run, "heartbeat", interrupted)
    outcomes = [cli("heartbeat", run_id)]
    monkeypatch.setattr(hot, "hot_values", lambda args: None)  # every line to click
    outcomes.append(cli("heartbeat", run_id))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0].code, outcomes[0].err) == (1, "\naborted\n")
