"""A permanent bad-input campaign: generated arguments, text, numbers, names, paths, checks
and targets against every verb, in-process through `waypost.cli.main`.

Every outcome must be exit 0 or a documented code (2, 3, 4, 5, 75), never 1 (a bug); with
--json an error is one `{"error": {"code", "message", "hint"}}` document (with `next` and
`also` when it names next steps); a refusal leaves
the store exactly as it was (every row of every table, blobs included); every call ends
within a bound (a hang guard, not a speed test). Generated input never runs a generated
command (commands come from a fixed allow-list) and reaches no host but 127.0.0.1.

CI runs a short campaign; `WAYPOST_CAMPAIGN=long` runs a long one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from tests.helpers import StoreDump, dump_store
from waypost.cli import main

LONG = os.environ.get("WAYPOST_CAMPAIGN") == "long"
EXAMPLES = 20_000 if LONG else 1500
HANG_GUARD = 60  # seconds for one call: far above what any call takes
DOCUMENTED = {0, 2, 3, 4, 5, 75}
COMMANDS = (["true"], ["false"], ["echo", "hi"], ["sh", "-c", "exit 3"], ["printf", "%s", "x"])
CLOSED_PORT = "http://127.0.0.1:9/nothing"  # the discard port: nothing listens here

def dump(store: Path) -> StoreDump:
    return dump_store(store)


# --- what the campaign types -------------------------------------------------------------

nasty_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "   ", "\x1b]52;c;aGk=\x07", "a\nb\n## Approval", "\udcff",
                     "caf\udce9", "-x", "--json", "..", ".bashrc", "x -o .bashrc", "\x00",
                     "a_" * 3000, "n" * 5000, "%s%n", "${HOME}", "password=hunter2"]),
)
def mostly(good: list[str], bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A good value two times in three, so that the campaign also reaches the rules."""
    return st.one_of(st.sampled_from(good), st.sampled_from(good), bad)


texts = mostly(["done", "reproduced locally", "the key is missing", "fixed"], nasty_text)
numbers = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "+inf", "-1", "0", "1e309", "99999999999999999999999",
                     "0.5", "1", "2", "-0", "0x10", "", "1_0", "\u0661"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
)
durations = st.one_of(
    numbers,
    st.sampled_from(["5m", "1h30m", "99999999d", "0s", "nan", "+inf", "1w", "30", "-5m",
                     "2h", "1x", "m", "1.5s"]),
)
deadlines = st.one_of(
    durations.map(lambda d: "+" + d),
    st.sampled_from(["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "tomorrow",
                     "2026-12-31T17:00Z", "2026-02-30", ""]),
)
actors = st.one_of(st.sampled_from(["alice", "w1", "w2", "mallory", "", " w1 ", "w\x1b[2J",
                                    "watchdog:x", "relay:x", "x" * 300]), nasty_text)
names = st.one_of(st.sampled_from(["report.md", "notes.md", ".bashrc", "-o", "x -o y", "a/b",
                                   "..", "", "ok.txt"]), nasty_text)
states = st.sampled_from(["in_progress", "blocked", "bogus", "delivered", "", "ready_for_review"])
kinds = st.sampled_from(["missing_input", "failed_command", "other", "worker_silent", "nope"])
evidence_kinds = st.sampled_from(["test", "build", "lint", "skipped", "nope", "command"])
roles = st.sampled_from(["draft", "report", "result", "other", "nope"])
targets = st.one_of(
    st.sampled_from(["file:result.md", "file:", "file:../../x", "file:/etc/passwd", "file:~/x",
                     "https://", "http://127.0.0.1:abc/", "javascript:alert(1)", "ftp://x/y",
                     "exec:", "exec:true", "none:", CLOSED_PORT, "slack:#x", "mailto:a@b"]),
    nasty_text.map(lambda t: "file:" + t),
)


@st.composite
def checks(draw: st.DrawFn, paths: list[str]) -> str:
    where = draw(st.sampled_from([*paths, "report.md", "missing"]))
    pattern = draw(st.one_of(st.sampled_from(["^(a+)+$", "(", "x", "[", "a{99999}", ""]),
                             nasty_text))
    return draw(st.one_of(
        st.sampled_from(["no-private", "no-private:report.md", f"http:{CLOSED_PORT} ok",
                         "http:javascript:x", "command:true", "command:false", "bogus:x",
                         "artifact:", "grep:", "command:"]),
        names.map(lambda n: "artifact:" + n),
        st.just(f"grep:{pattern}:{where}"),
        st.just(f"grep!:{pattern}:{where}"),
    ))


def flat(parts: tuple[list[str], ...]) -> list[str]:
    return [word for part in parts for word in part]


def opt(flag: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    """The option with a generated value, or nothing."""
    return st.one_of(st.just([]), values.map(lambda v: [flag, v]))


@st.composite
def command_lines(draw: st.DrawFn, run: str, paths: list[str]) -> list[str]:
    """One whole command line of some verb, with generated (hostile) values."""
    runs = mostly([run], st.one_of(st.sampled_from(["wp_nope", "", "-x", "wp_" + "0" * 26]),
                                   nasty_text))
    r = draw(runs)
    path = st.sampled_from([*paths, "missing.md", ".", ""])
    verbs: dict[str, st.SearchStrategy[list[str]]] = {
        "heartbeat": st.tuples(opt("--note", texts), opt("--progress", numbers),
                               opt("--epoch", numbers)).map(lambda t: ["heartbeat", r, *flat(t)]),
        "block": st.tuples(kinds, texts).map(
            lambda t: ["block", r, "--kind", t[0], "--detail", t[1]]),
        "unblock": st.tuples(st.sampled_from(["b1", "b9", "", "x"]), texts).map(
            lambda t: ["unblock", r, t[0], "--resolution", t[1]]),
        "claim": st.just(["claim", r]),
        "show": st.sampled_from([[], ["--md"], ["--public"]]).map(lambda f: ["show", r, *f]),
        "ls": st.tuples(opt("--state", states), opt("--limit", numbers),
                        opt("--owner", actors)).map(lambda t: ["ls", *flat(t)]),
        "start": st.tuples(texts, opt("--owner", actors), opt("--target", targets),
                           opt("--notify", targets), opt("--max-silence", durations),
                           opt("--heartbeat-interval", durations), opt("--expect", durations),
                           opt("--deadline", deadlines),
                           opt("--gate", st.sampled_from(["t=command:true", "bad", "=x",
                                                          "g=no-private", "g?=grep:x:y"])),
                           opt("--idempotency-key", texts),
                           opt("--kind", st.sampled_from(["bounded", "long_running", "x"])),
                           ).map(lambda t: ["start", t[0], *flat(t[1:])]),
        "artifact add": st.tuples(path, opt("--name", names), opt("--role", roles)).map(
            lambda t: ["artifact", "add", r, t[0], *t[1], *t[2]]),
        "artifact get": st.tuples(names, st.sampled_from(["out.md", "-", "link",
                                                         "missing/dir/x", "fifo", "."])).map(
            lambda t: ["artifact", "get", r, t[0], "-o", t[1]]),
        "evidence run": st.tuples(opt("--timeout", durations), st.sampled_from(COMMANDS),
                                  opt("--kind", evidence_kinds)).map(
            lambda t: ["evidence", "run", r, *t[0], *t[2], "--", *t[1]]),
        "evidence check": checks(paths).map(lambda c: ["evidence", "check", r, c]),
        "evidence skip": st.tuples(evidence_kinds, texts).map(
            lambda t: ["evidence", "skip", r, "--kind", t[0], "--reason", t[1]]),
        "evidence add": st.tuples(evidence_kinds, texts).map(
            lambda t: ["evidence", "add", r, "--kind", t[0], "--verdict", "passed",
                       "--summary", t[1]]),
        "ready": st.tuples(texts, opt("--public-summary", texts),
                           opt("--artifact", names)).map(
            lambda t: ["ready", r, "--summary", t[0], *t[1], *t[2]]),
        "review": st.just(["review", r]),
        "approve": opt("--waive", st.sampled_from(["tests=no runner", "x", "=y", "a="])).map(
            lambda w: ["approve", r, *w]),
        "changes": texts.map(lambda t: ["changes", r, "--reason", t]),
        "transfer": st.tuples(st.sampled_from(["approve", "deliver", "takeover", "x"]),
                              actors).map(
            lambda t: ["transfer", r, "--authority", t[0], "--to", t[1]]),
        "cancel": texts.map(lambda t: ["cancel", r, "--reason", t]),
        "resume": st.just(["resume", r]),
        "log": st.just(["log", r]),
        "verify": st.sampled_from([["verify"], ["verify", r]]),
        "scan": path.map(lambda p: ["scan", p]),
        "deliver": st.tuples(opt("--timeout", durations), opt("--horizon", durations)).map(
            lambda t: ["deliver", "--once", *flat(t)]),
        "watch": opt("--interval", durations).map(lambda t: ["watch", "--once", *t]),
        "prune": durations.map(lambda d: ["prune", "--older-than", d]),
    }
    argv = draw(st.sampled_from(sorted(verbs)).flatmap(lambda v: verbs[v]))
    extra = draw(st.sampled_from([[], ["--json"]]))
    who = draw(st.one_of(st.just([]), mostly(["alice", "w1"], actors).map(
        lambda a: ["--as", a])))
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], *extra, *who, *argv[cut:]]


# --- the harness ------------------------------------------------------------------------


class Hung(Exception):
    pass


@contextlib.contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    def alarm(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with hang_guard(HANG_GUARD), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, list[str]]:
    """A store with one run that worker w1 holds, and files of every awkward kind."""
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("WAYPOST_")]:
        monkeypatch.delenv(key)
    store = tmp_path / ".waypost" / "waypost.db"
    monkeypatch.setenv("WAYPOST_URL", str(store))
    monkeypatch.setenv("WAYPOST_ACTOR", "alice")
    assert call(["init"])[0] == 0
    code, run, _ = call(["start", "Write the report", "--owner", "alice", "--kind",
                         "long_running", "--target", "file:result.md", "--max-silence", "30m",
                         "--gate", "t=command:true"])
    assert code == 0
    run = run.strip()
    assert call(["claim", run, "--as", "w1"])[0] == 0
    (tmp_path / "report.md").write_text("# Report\n\nThe race in the login test is fixed.\n")
    (tmp_path / "empty.md").write_text("")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to("/dev/zero")
    (tmp_path / "dir").mkdir()
    return store, run, ["report.md", "empty.md", "fifo", "link", "dir", "/dev/zero",
                        "/proc/self/status"]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_verb_meets_hostile_input(world: tuple[Path, str, list[str]],
                                        data: st.DataObject) -> None:
    store, run, paths = world
    argv = data.draw(command_lines(run, paths))
    note(f"waypost {argv!r}")
    before = dump(store)
    code, _, err = call(argv)
    event(f"{' '.join(argv[:2] if argv[0] in ('artifact', 'evidence') else argv[:1])}: "
          f"exit {code}")
    assert code in DOCUMENTED, f"exit {code} (a bug): {err}"
    if code != 0 and "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        document = json.loads(err.strip().split("\n")[-1])  # not splitlines: U+0085 is text
        assert {"code", "message", "hint"} <= set(document["error"]) <= {
            "code", "message", "hint", "next", "also"}, err
    if code != 0:
        assert dump(store) == before, f"exit {code} changed the store: {err}"
