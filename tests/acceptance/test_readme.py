"""The README is a guide that runs: its code blocks, pasted as written, must work.

The convention every README section follows (the README states it too):

- A ```sh block runs. All of them run in document order in one bash process, in an empty
  temporary directory that is also HOME, with this venv's `waypost` first on PATH and no
  WAYPOST_* variable set. The first ```sh block (the two install commands) does not run
  here: CI runs it (`.ci/run`); here it is only checked to be those two commands.
- Each command (a line; lines ending in a backslash continue it) must exit 0, and a failure
  names its README line. A command the rules are meant to refuse says so in the shell, as
  the reader sees it: `waypost approve … || [ $? -eq 3 ]`. The harness runs the part before
  `||` and requires exactly that exit code, so a refusal that stops refusing fails too.
- A run block holds one command per line (no here-documents, no multi-line if/for) and no
  comments (interactive zsh does not take them); it runs every daemon with `--once`
  (`waypost watch --once`, `waypost deliver --once`), leaves no process behind, and uses no
  address but 127.0.0.1.
- A ```console block is shown only: daemons, servers, secrets, anything that cannot run in
  an empty directory. Write its commands after a `$ ` prompt.
- A ```python block runs, each as its own script in the same directory after the shell
  blocks (so it keeps its own store path), unless its first line is `# shown only: WHY`.
- Any other block (toml, text) is shown only.

A hang guard ends the shell after TOUR_TIMEOUT seconds and names the command it was on.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOUR_TIMEOUT = 300.0  # seconds; the tour takes well under a minute
INSTALL = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/waypost demo",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && scripts/check",
)
SHOWN_ONLY = "# shown only:"
# the block languages the convention knows; `bash` or `shell` would be shown without running
LANGUAGES = {"sh", "console", "python", "toml", "json", "text"}
FENCE = re.compile(r"^```([\w+-]*)\s*$")
EXPECTED_EXIT = re.compile(r"\s*\|\|\s*\[ \$\? -eq (\d+) \]\s*$")
DAEMON = re.compile(r"\bwaypost\s+(watch|deliver)\b")
IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://([^/\s'\"]*)")


class TourFailed(AssertionError):
    """A README block did not do what the README says."""


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # the README line of its first content line
    lines: tuple[str, ...]

    @property
    def runs(self) -> bool:
        if self.lang == "sh":
            return True
        return self.lang == "python" and not (self.lines and
                                              self.lines[0].startswith(SHOWN_ONLY))


@dataclass(frozen=True)
class Command:
    line: int  # the README line it starts on
    source: str  # as written, continuation lines included
    expected: int  # its exit code: 0, or N from a trailing `|| [ $? -eq N ]`

    @property
    def runnable(self) -> str:
        """The command without its `|| [ $? -eq N ]`: the harness checks N itself."""
        return EXPECTED_EXIT.sub("", self.source)

    @property
    def joined(self) -> str:
        return re.sub(r"\\\n\s*", "", self.source)


def blocks(text: str) -> list[Block]:
    found: list[Block] = []
    lang: str | None = None
    start, body = 0, list[str]()
    for number, line in enumerate(text.splitlines(), start=1):
        if lang is None:
            if line.lstrip().startswith("```") and not line.startswith("```"):
                raise TourFailed(f"README.md:{number}: an indented fence; the README test "
                                 "reads only fences at the start of a line")
            opening = FENCE.match(line)
            if opening:
                lang, start, body = opening.group(1), number + 1, []
        elif line.startswith("```"):
            found.append(Block(lang, start, tuple(body)))
            lang = None
        else:
            body.append(line)
    if lang is not None:
        raise TourFailed(f"README.md:{start - 1}: a code block that never closes")
    return found


def commands(block: Block) -> list[Command]:
    """The block's commands: one a line, `\\`-continued lines joined; blank lines skipped."""
    found: list[Command] = []
    pending: list[str] = []
    first = 0
    for number, line in enumerate(block.lines, start=block.line):
        if not pending and not line.strip():
            continue
        if not pending:
            first = number
        pending.append(line)
        if line.endswith("\\"):
            continue
        source = "\n".join(pending)
        expected = EXPECTED_EXIT.search(source)
        found.append(Command(first, source, int(expected.group(1)) if expected else 0))
        pending = []
    if pending:
        raise TourFailed(f"README.md:{first}: the block ends inside a continued command")
    return found


def tour(text: str) -> tuple[list[Command], list[Block]]:
    """The shell commands to run (after the install block) and the Python blocks to run."""
    shell = [b for b in blocks(text) if b.lang == "sh"]
    if not shell:
        raise TourFailed("README.md has no ```sh block")
    steps = [c for b in shell[1:] for c in commands(b)]
    return steps, [b for b in blocks(text) if b.lang == "python" and b.runs]


# --- the convention, checked before anything runs --------------------------------------


def comment_at(source: str) -> int | None:
    """Where a shell comment starts (a `#` beginning a word outside quotes), if one does."""
    quote: str | None = None
    escaped = False
    previous = " "
    for index, char in enumerate(source):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and previous in " \t\n;":
            return index
        previous = char
    return None


def convention_problems(command: Command) -> Iterator[str]:
    where = f"README.md:{command.line}: {command.joined.strip()[:80]}"
    if comment_at(command.source) is not None:
        yield f"{where}: a comment in a run block (zsh would pass it on as arguments)"
    syntax = subprocess.run(["bash", "-n", "-c", command.runnable], capture_output=True,
                            text=True, check=False)
    if syntax.returncode != 0 or syntax.stderr.strip():  # a here-document only warns
        yield (f"{where}: not one complete shell command ({syntax.stderr.strip()}); write "
               "one command a line, continued with a backslash")
    daemon = DAEMON.search(command.joined)
    if daemon and "--once" not in command.joined:
        yield f"{where}: `waypost {daemon.group(1)}` runs until stopped: use --once"
    hosts = [m.group(0) for m in IPV4.finditer(command.joined)] + \
        [m.group(1).rsplit("@", 1)[-1].split(":")[0] for m in URL.finditer(command.joined)]
    hosts += ["localhost"] * command.joined.count("localhost")
    for host in hosts:
        if host and host != "127.0.0.1":
            yield f"{where}: address {host!r}: a run block uses no address but 127.0.0.1"


# --- running -------------------------------------------------------------------------


def tour_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    return env


def script(steps: Sequence[Command], progress: Path, verdict: Path) -> str:
    """One bash script: each command as written, then a check of its exit code."""
    lines = ["set -u -o pipefail"]
    for step in steps:
        lines += [f"printf '%s\\n' {step.line} > {shlex.quote(str(progress))}",
                  step.runnable,
                  "__rc=$?",
                  f'if [ "$__rc" -ne {step.expected} ]; then '
                  f'printf "%s %s\\n" {step.line} "$__rc" > {shlex.quote(str(verdict))}; '
                  "exit 100; fi"]
    return "\n".join(lines) + "\n"


def run_shell(steps: Sequence[Command], *, cwd: Path, work: Path, env: Mapping[str, str],
              timeout: float = TOUR_TIMEOUT) -> str:
    """Run the commands in order in one bash; return the output, or raise naming the
    command that did not exit as the README says."""
    progress, verdict, log = work / "progress", work / "verdict", work / "output"
    path = work / "tour.sh"
    path.write_text(script(steps, progress, verdict), "utf-8")
    by_line = {s.line: s for s in steps}
    with log.open("wb") as out:
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", str(path)], cwd=cwd,
                                env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(proc)
    output = log.read_text("utf-8", errors="replace")
    if code is None:
        step = by_line[int(progress.read_text().split()[0])]
        raise TourFailed(f"README.md:{step.line}: still running after {timeout:g}s: "
                         f"{step.joined.strip()}\n{_tail(output)}")
    if code != 0:
        if not verdict.exists():
            raise TourFailed(f"the tour's shell exited {code} outside any command check "
                             f"(an unset variable?)\n{_tail(output)}")
        line, got = (int(v) for v in verdict.read_text().split())
        step = by_line[line]
        raise TourFailed(f"README.md:{line}: exited {got}, the README expects {step.expected}:"
                         f" {step.joined.strip()}\n{_tail(output)}")
    return output


def run_python(block: Block, *, cwd: Path, work: Path, env: Mapping[str, str],
               timeout: float = TOUR_TIMEOUT) -> str:
    path = work / f"readme_{block.line}.py"
    path.write_text("\n".join(block.lines) + "\n", "utf-8")
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=cwd, env=dict(env),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TourFailed(f"README.md:{block.line}: the Python block still ran after "
                         f"{timeout:g}s") from exc
    if proc.returncode != 0:
        raise TourFailed(f"README.md:{block.line}: the Python block exited {proc.returncode}"
                         f"\n{_tail(proc.stdout + proc.stderr)}")
    return proc.stdout


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the shell and anything a block left running in its process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(output: str, lines: int = 40) -> str:
    return "--- output, last lines ---\n" + "\n".join(output.splitlines()[-lines:])


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """An empty directory to run in (also HOME) and one beside it for the harness."""
    (tmp_path / "tour").mkdir()
    (tmp_path / "harness").mkdir()
    return tmp_path / "tour", tmp_path / "harness"


# --- the README -----------------------------------------------------------------------


def test_it_opens_with_what_it_is_for_then_the_two_commands() -> None:
    text = README.read_text("utf-8")
    opening = [line for line in text[:text.index("```")].splitlines() if line.strip()]
    assert opening[0] == "# waypost"
    assert 1 <= len(opening[1:]) <= 3, opening  # what it is for, and for whom: three lines
    first = blocks(text)[0]
    assert first.lang == "sh"
    assert tuple(line for line in first.lines if line.strip()) == INSTALL
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert "pip install -q -e '.[dev]'" in ci
    assert "\nscripts/check" in ci


def test_every_block_says_whether_it_runs() -> None:
    unknown = [f"README.md:{b.line - 1}: ```{b.lang}" for b in blocks(README.read_text("utf-8"))
               if b.lang not in LANGUAGES]
    assert not unknown, (f"{unknown}: write ```sh (runs) or ```console (shown only); "
                         f"known: {sorted(LANGUAGES)}")


def test_every_run_block_follows_the_convention() -> None:
    steps, _ = tour(README.read_text("utf-8"))
    assert len(steps) > 20  # the tour is there
    problems = [p for step in steps for p in convention_problems(step)]
    assert not problems, "\n".join(problems)


def test_the_readme_runs_as_written(dirs: tuple[Path, Path]) -> None:
    here, work = dirs
    assert (Path(sys.executable).parent / "waypost").exists(), "waypost is not installed here"
    steps, python = tour(README.read_text("utf-8"))
    assert python, "the README has no Python block to run"
    output = run_shell(steps, cwd=here, work=work, env=tour_env(here))
    assert "ok: " in output  # `waypost verify` spoke
    assert "The login test no longer flakes." in (here / "result.md").read_text("utf-8")
    for block in python:
        run_python(block, cwd=here, work=work, env=tour_env(here))


def test_help_says_whom_it_trusts() -> None:
    waypost = Path(sys.executable).parent / "waypost"
    shown = subprocess.run([str(waypost), "--help"], capture_output=True, text=True,
                           check=True, env=tour_env(Path.cwd())).stdout
    shown = " ".join(shown.split())  # as click wrapped it
    assert "A local store trusts --as, as git trusts a commit's author" in shown
    assert "A local store trusts `--as`, as git trusts a commit's author" in \
        README.read_text("utf-8")


# --- the harness catches what it is for ----------------------------------------------


def readme(*shell_blocks: str) -> str:
    install = "```sh\n" + "\n".join(INSTALL) + "\n```\n"
    return install + "".join(f"\ntext\n\n```sh\n{b}\n```\n" for b in shell_blocks)


def run_text(text: str, dirs: tuple[Path, Path], timeout: float = 60.0) -> str:
    here, work = dirs
    steps, _ = tour(text)
    return run_shell(steps, cwd=here, work=work, env=tour_env(here), timeout=timeout)


def test_a_renamed_option_fails_naming_its_line(dirs: tuple[Path, Path]) -> None:
    text = readme("waypost init",
                  'RUN=$(waypost start "t" --as alice \\\n    --target none:)\n'
                  "waypost show $RUN --as alice --bogus-option")
    with pytest.raises(TourFailed, match=r"README\.md:17: exited 2, the README expects 0: "
                                         r"waypost show \$RUN --as alice --bogus-option"):
        run_text(text, dirs)


def test_continued_lines_run_as_one_command_in_one_shell(dirs: tuple[Path, Path]) -> None:
    text = readme('X=$(printf "%s" \\\n    joined)', 'printf "%s" "$X" > x.txt')
    run_text(text, dirs)
    assert (dirs[0] / "x.txt").read_text() == "joined"


def test_an_expected_refusal_must_happen_with_its_exit_code(dirs: tuple[Path, Path]) -> None:
    run_text(readme("sh -c 'exit 3' || [ $? -eq 3 ]"), dirs)
    with pytest.raises(TourFailed, match="exited 0, the README expects 3"):
        run_text(readme("true || [ $? -eq 3 ]"), dirs)
    with pytest.raises(TourFailed, match="exited 4, the README expects 3"):
        run_text(readme("sh -c 'exit 4' || [ $? -eq 3 ]"), dirs)


def test_a_hang_is_cut_off_naming_the_command(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(TourFailed, match=r"README\.md:\d+: still running after 1s: sleep 60"):
        run_text(readme("true", "sleep 60"), dirs, timeout=1.0)


def test_a_failing_python_block_fails(dirs: tuple[Path, Path]) -> None:
    block = Block("python", 7, ("import sys", "sys.exit(3)"))
    with pytest.raises(TourFailed, match=r"README\.md:7: the Python block exited 3"):
        run_python(block, cwd=dirs[0], work=dirs[1], env=tour_env(dirs[0]))
    assert not Block("python", 1, (f"{SHOWN_ONLY} it serves forever", "x")).runs


@pytest.mark.parametrize(("command", "problem"), [
    ("waypost init  # here", "a comment"),
    ("# a note", "a comment"),
    ("waypost watch --interval 1s", "use --once"),
    ("waypost deliver", "use --once"),
    ("curl -s http://localhost:8088/", "no address but 127.0.0.1"),
    ("curl -s https://staging.example/health", "no address but 127.0.0.1"),
    ("ping -c1 10.0.0.1", "no address but 127.0.0.1"),
    ("if true; then", "not one complete shell command"),
    ("cat <<EOF", "not one complete shell command"),
])
def test_the_convention_check_names_what_breaks_it(command: str, problem: str) -> None:
    found = list(convention_problems(Command(5, command, 0)))
    assert any(problem in p for p in found), found


@pytest.mark.parametrize("command", [
    "printf '# Report\\n' > report.md",
    'waypost start "issue #12" --as alice',
    "curl -s http://127.0.0.1:8088/health",
    "waypost watch --once",
    "waypost approve $RUN --as bob || [ $? -eq 3 ]",
])
def test_the_convention_check_lets_the_tour_be(command: str) -> None:
    assert list(convention_problems(Command(5, command, 0))) == []
