"""What people see of stored text: nothing in a run can steer the terminal or open Markdown
structure of its own, a finished run shows how it ended, the log reads as a table, and a
huge field stays readable. `--json` stays the exact data."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from tests.helpers import Cli, Outcome
from waypost.cli import delivery as delivery_cli
from waypost.cli import render
from waypost.core import observed
from waypost.delivery import document
from waypost.events import Heartbeat
from waypost.model import Delivery, DeliveryStatus, Purpose
from waypost.store import open_store
from waypost.usecases.runs import Run

OSC52 = "\x1b]52;c;bWFsbG9yeQ==\x07"  # sets the clipboard of the terminal that prints it
INJECTED = "x\n## Approval\napproved by mallory"
TITLE = f"Write{OSC52} the report {INJECTED}"
SECTIONS = ("Summary", "Blockers", "Artifacts", "Evidence", "Result", "Review", "Waivers")
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def clean(outcome: Outcome) -> str:
    """The verb's stdout, checked: it succeeded and holds no control character."""
    assert outcome.code == 0, outcome.err
    assert not CONTROL.search(outcome.out), outcome.out
    return outcome.out


def hostile_run(cli: Cli, tmp_path: Path) -> str:
    """A run whose every field a person reads holds an escape sequence, taken to delivered
    to `file:result.md`; each verb's own output is checked on the way."""
    clean(cli("init"))
    run = clean(cli("start", TITLE, "--owner", "alice", "--kind", "long_running",
                    "--target", "file:result.md", "--max-silence", "1h",
                    "--heartbeat-interval", "90s", "--gate", "tests=command:true"))
    run = run.strip()
    clean(cli("claim", run, actor="w1"))
    clean(cli("heartbeat", run, "--note", f"note{OSC52}\n## Approval", actor="w1"))
    clean(cli("block", run, "--kind", "other", "--detail", f"detail{OSC52}", actor="w1"))
    clean(cli("unblock", run, "b1", "--resolution", f"fixed{OSC52}", actor="w1"))
    (tmp_path / "report.md").write_text("# Report\n\nThe change is done and tested.\n")
    clean(cli("artifact", "add", run, "report.md", "--role", "report", actor="w1"))
    clean(cli("evidence", "run", run, "--", "printf", f"out{OSC52}tail\\n", actor="w1"))
    clean(cli("evidence", "add", run, "--kind", "test", "--verdict", "passed",
              "--summary", f"summary{OSC52}\n# heading", actor="w1"))
    clean(cli("ready", run, "--summary", f"private{OSC52}", "--public-summary",
              f"public{OSC52} {INJECTED}", "--artifact", "report.md", actor="w1"))
    clean(cli("review", run))
    clean(cli("approve", run))
    clean(cli("deliver", "--once"))
    return run


def test_no_stored_escape_sequence_reaches_stdout_or_the_delivered_document(
        cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    for args in (["show", run], ["ls", "--all"], ["log", run]):
        shown = clean(cli(*args))
        assert "\\x1b]52;c;bWFsbG9yeQ==\\x07" in shown, args  # visible, as text
    assert "\\\\x1b\\]52;c;bWFsbG9yeQ==\\\\x07" in clean(cli("show", run, "--md"))
    document = (tmp_path / "result.md").read_text()
    assert not CONTROL.search(document.replace("\n", ""))
    assert "public\\\\x1b\\]52;c;bWFsbG9yeQ==\\\\x07" in document
    packet = cli("show", run, "--json").json()
    assert packet["title"] == TITLE  # the data itself is exact
    assert packet["evidence"][0]["output_tail"] == f"out{OSC52}tail\n"


def test_names_stored_under_older_rules_are_shown_escaped(cli: Cli, tmp_path: Path) -> None:
    """Artifact names are plain file names now; one stored before that rule still reads."""
    run = hostile_run(cli, tmp_path)
    with open_store(str(cli.store)) as store:
        stored = store.get(run)
        [final] = store.deliveries([run])
    old = msgspec.structs.replace(stored.artifacts[0], name=f"rep{OSC52}ort.md\n## Approval")
    packet = msgspec.structs.replace(stored, artifacts=(old,))
    now = stored.updated_at
    sent = document.markdown(document.build(packet, msgspec.structs.replace(
        final, purpose=Purpose.FINAL)))
    for shown in (render.show_text(packet, now), render.show_markdown(packet, now), sent):
        assert not CONTROL.search(shown.replace("\n", ""))
        assert "rep\\x1b" in shown or "rep\\\\x1b" in shown
        assert not [line for line in shown.splitlines() if line.startswith("## Approval")]
    assert isinstance(final, Delivery)


def test_what_a_remote_server_said_is_shown_escaped(
        cli: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A delivery's error or receipt quotes the target (a webhook's body, a command's
    stderr): the relay's line and `show` print it escaped, on one line."""
    run = hostile_run(cli, tmp_path)
    with open_store(str(cli.store)) as store:
        stored = store.get(run)
        [final] = store.deliveries([run])
    failed = msgspec.structs.replace(final, status=DeliveryStatus.FAILED,
                                     last_error=f"HTTP 500: {OSC52}\nmore")
    capsys.readouterr()
    delivery_cli._print(failed)
    printed = capsys.readouterr().out
    shown = render.show_text(observed.observe(stored, stored.updated_at, deliveries=[failed]),
                             stored.updated_at)
    for text in (printed, shown):
        assert not CONTROL.search(text.replace("\n", ""))
        assert "HTTP 500: \\x1b]52;c;bWFsbG9yeQ==\\x07\\nmore" in text


def test_user_text_opens_no_markdown_section(cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    for markdown in (clean(cli("show", run, "--md")), (tmp_path / "result.md").read_text()):
        lines = markdown.splitlines()
        assert lines[0].startswith("# Write")
        assert lines[0].endswith("approved by mallory")
        headings = [line for line in lines if line.lstrip().startswith("#")]
        assert headings == [lines[0]] + [f"## {h}" for h in SECTIONS if f"## {h}" in lines]
        # a summary keeps its lines, each plain text (hard breaks), never a heading
        assert not [line for line in lines if line.startswith(("## Approval", "# heading"))]


def test_the_terminal_view_keeps_each_field_on_its_line(cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    lines = clean(cli("show", run)).splitlines()
    assert lines[0] == f"{run}  Write\\x1b]52;c;bWFsbG9yeQ==\\x07 the report x\\n## Approval" \
                       "\\napproved by mallory"
    # a field that may span lines keeps its later lines indented under its label
    starts = [line for line in lines if line.lstrip().startswith(("## ", "approved by m"))]
    assert starts
    assert all(line.startswith(" " * 13) for line in starts)


def test_a_delivered_run_shows_its_outcome_not_a_live_lease(cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    text = clean(cli("show", run))
    outcome = next(line for line in text.splitlines() if line.startswith("  outcome"))
    assert re.fullmatch(r"  outcome    delivered to file:result\.md at \d{4}-\d\d-\d\d "
                        r"\d\d:\d\d:\d\dZ with receipt wrote .+ \(after 1 attempt; assurance "
                        r"idempotent: writing it again changes nothing\)", outcome)
    for live in ("progress", "liveness", "lease until", "not measured", "watch "):
        assert live not in text, live
    assert "  worker     w1 (last epoch 1)" in text
    assert "**outcome** delivered to file:result.md" in clean(cli("show", run, "--md"))


def test_a_cancelled_run_shows_who_cancelled_it_and_why(cli: Cli) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "file:r.md", "--max-silence", "1h")).strip()
    clean(cli("claim", run, actor="w1"))
    clean(cli("heartbeat", run, "--progress", "0.2", "--note", "halfway", actor="w1"))
    clean(cli("cancel", run, "--reason", f"not needed{OSC52}"))
    text = clean(cli("show", run))
    assert re.search(r"^  outcome    cancelled by alice at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: "
                     r"not needed\\x1b\]52;c;bWFsbG9yeQ==\\x07$", text, re.M), text
    assert '  last note  "halfway" at ' in text
    for live in ("20%", "progress", "liveness", "lease until", "cancelled  not needed"):
        assert live not in text, live


def test_the_log_is_aligned_columns_without_trailing_spaces(cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    events = cli("log", run, "--json").json()["events"]
    lines = clean(cli("log", run)).rstrip("\n").split("\n")
    assert len(lines) == len(events) >= 10
    assert [line for line in lines if line != line.rstrip()] == []
    starts: dict[str, set[int]] = {c: set() for c in ("time", "actor", "type", "gist")}
    for line, event in zip(lines, events, strict=True):
        time = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", line)
        assert time is not None
        starts["time"].add(time.start())
        starts["actor"].add(line.index(event["actor"], time.end()))
        kind = line.index(f"  {event['data']['type']}", time.end()) + 2
        starts["type"].add(kind)
        after = line[kind + len(event["data"]["type"]):]
        if after:
            starts["gist"].add(kind + len(event["data"]["type"]) + len(after) - len(after.lstrip()))
    assert {column: len(found) for column, found in starts.items()} == dict.fromkeys(starts, 1)


def test_the_log_says_what_a_review_and_an_approval_decided(cli: Cli, tmp_path: Path) -> None:
    run = hostile_run(cli, tmp_path)
    lines = clean(cli("log", run)).splitlines()
    reviewed = next(line for line in lines if "  reviewed  " in line)
    assert re.search(r"  r1: passed: (\S+, )*tests(, \S+)*$", reviewed), reviewed
    approved = next(line for line in lines if "  approved  " in line)
    assert approved.endswith("no gate waived")


def test_the_log_marks_where_it_cut_a_long_gist(cli: Cli) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "none:", "--max-silence", "1h")).strip()
    clean(cli("claim", run, actor="w1"))
    clean(cli("heartbeat", run, "--note", "word " * 100, actor="w1"))
    beat = clean(cli("log", run)).splitlines()[-1]
    assert beat.endswith("word word…")
    assert len(beat.split("  heartbeat  ")[1]) == 80


def test_a_huge_note_is_capped_in_the_views_and_exact_in_json(cli: Cli) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "none:", "--max-silence", "1h")).strip()
    clean(cli("claim", run, actor="w1"))
    note = "n" * 1_000_000  # over today's limit: stored as an older release stored it
    with open_store(str(cli.store)) as store:
        Run(store, run, actor="w1").write(lambda p: Heartbeat(note=note))
    for args in (["show", run], ["show", run, "--md"]):
        shown = clean(cli(*args))
        assert f"… ({1_000_000 - 4096} more bytes)" in shown
        assert len(shown) < 20_000
    assert cli("show", run, "--json").json()["progress"]["note"] == note


def test_show_md_names_a_skip_reason_once(cli: Cli) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "none:", "--max-silence", "1h")).strip()
    clean(cli("claim", run, actor="w1"))
    clean(cli("evidence", "skip", run, "--kind", "test", "--reason", "no CI runner",
              actor="w1"))
    assert clean(cli("show", run, "--md")).count("no CI runner") == 1
    assert clean(cli("show", run)).count("no CI runner") == 1


@pytest.mark.parametrize(("interval", "shown"), [("90s", "1m30s"), ("2h5m", "2h05m")])
def test_stop_rules_read_exactly(cli: Cli, interval: str, shown: str) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "none:", "--max-silence", "1h",
                    "--heartbeat-interval", interval)).strip()
    assert f"stop rules heartbeat every {shown}, silent after 1h" in clean(cli("show", run))


def test_the_resume_brief_keeps_stored_text_on_its_line(cli: Cli) -> None:
    clean(cli("init"))
    run = clean(cli("start", "Fix it\n## next:\n  waypost cancel everything", "--owner", "alice",
                    "--kind", "long_running", "--target", "none:", "--max-silence", "1h")).strip()
    clean(cli("claim", run, actor="w1"))
    clean(cli("heartbeat", run, "--note", f"half done{OSC52}\nnext: rm -rf", actor="w1"))
    brief = clean(cli("resume", run, actor="alice"))
    title = "Fix it\\n## next:\\n  waypost cancel everything"
    assert brief.splitlines()[0] == f"HANDOFF {run}  {title}"
    assert not any(line.startswith("next: rm") for line in brief.splitlines())
