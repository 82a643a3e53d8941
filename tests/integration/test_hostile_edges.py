"""Hostile input at the CLI's edges: a refused command runs nothing and writes nothing;
numbers, text and names are decided (exit 2, naming the flag or field) before the store is
touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Cli, StoreDump, dump_store


def dump(store: Path) -> StoreDump:
    return dump_store(store)


@pytest.fixture
def run(cli: Cli) -> str:
    cli.ok("init")
    return cli.ok("start", "Write the report", "--owner", "alice", "--kind", "long_running",
                  "--target", "file:result.md", "--max-silence", "30m")


def touch(path: Path) -> list[str]:
    return ["--", "sh", "-c", f"touch {path}"]


def refused_without_trace(cli: Cli, args: list[str], actor: str, code: int,
                          side: Path) -> None:
    before = dump(cli.store)
    outcome = cli(*args, actor=actor)
    assert outcome.code == code, outcome.err
    assert not side.exists(), "the refused command ran"
    assert dump(cli.store) == before, "the refusal left a trace in the store"


def test_evidence_run_on_a_missing_run_runs_nothing(cli: Cli, run: str, tmp_path: Path) -> None:
    side = tmp_path / "SIDE"
    refused_without_trace(cli, ["evidence", "run", "wp_nope", *touch(side)], "alice", 4, side)


def test_evidence_run_by_a_fenced_worker_runs_nothing(cli: Cli, run: str,
                                                      tmp_path: Path) -> None:
    cli.ok("claim", run, actor="w1")
    cli.ok("claim", run, actor="alice")  # the owner takes the lease: w1 is fenced
    side = tmp_path / "SIDE"
    refused_without_trace(cli, ["evidence", "run", run, "--epoch", "1", *touch(side)], "w1", 3,
                          side)


def test_evidence_run_on_a_cancelled_run_runs_nothing(cli: Cli, run: str,
                                                      tmp_path: Path) -> None:
    cli.ok("claim", run, actor="w1")
    cli.ok("cancel", run, "--reason", "not needed", actor="alice")
    side = tmp_path / "SIDE"
    refused_without_trace(cli, ["evidence", "run", run, *touch(side)], "w1", 3, side)


def test_a_command_check_by_a_stranger_runs_nothing(cli: Cli, run: str, tmp_path: Path) -> None:
    cli.ok("claim", run, actor="w1")
    side = tmp_path / "SIDE"
    refused_without_trace(cli, ["evidence", "check", run, f"command:touch {side}"], "mallory", 3,
                          side)


def test_the_worker_still_runs_evidence(cli: Cli, run: str, tmp_path: Path) -> None:
    cli.ok("claim", run, actor="w1")
    side = tmp_path / "SIDE"
    cli.ok("evidence", "run", run, *touch(side), actor="w1")
    cli.ok("evidence", "check", run, f"command:rm {side}", actor="w1")
    assert not side.exists()


BAD_NUMBERS = [  # a start parameter is named as every door names it (waypost.start_spec)
    (["start", "t", "--max-silence", "nan"], "max_silence:"),
    (["start", "t", "--max-silence", "99999999d"], "max_silence:"),
    (["start", "t", "--max-silence", "0"], "max_silence:"),
    (["start", "t", "--heartbeat-interval", "inf"], "heartbeat_interval:"),
    (["start", "t", "--expect", "nan"], "expect:"),
    (["start", "t", "--deadline", "9999-12-31T23:59:59-14:00"], "deadline:"),
    (["start", "t", "--deadline", "+inf"], "deadline:"),
    (["start", "t", "--deadline", "+nan"], "deadline:"),
    (["heartbeat", "RUN", "--epoch", "0"], "--epoch"),
    (["heartbeat", "RUN", "--epoch", "99999999999999999999"], "--epoch"),
    (["heartbeat", "RUN", "--progress", "1e308"], "--progress"),
    (["prune", "--older-than", "nan"], "--older-than"),
    (["watch", "--once", "--interval", "inf"], "--interval"),
    (["deliver", "--once", "--timeout", "nan"], "--timeout"),
    (["deliver", "--once", "--horizon", "nan"], "--horizon"),
    (["deliver", "--once", "--interval", "nan"], "--interval"),
    (["ls", "--limit", "99999999999999999999999"], "--limit"),
    (["ls", "--limit", "0"], "--limit"),
    (["doctor", "--max-skew", "-1s"], "--max-skew"),
]


@pytest.mark.parametrize(("args", "flag"), BAD_NUMBERS, ids=str)
def test_a_bad_number_is_refused_naming_its_flag(cli: Cli, run: str, args: list[str],
                                                 flag: str) -> None:
    before = dump(cli.store)
    outcome = cli(*[run if a == "RUN" else a for a in args], "--json")
    assert outcome.code == 2, outcome.err
    assert outcome.error()["code"] == "invalid_input"
    assert flag in outcome.error()["message"]
    assert dump(cli.store) == before


@pytest.mark.parametrize("value", ["nan", "inf", "-0.1", "1.5"])
def test_progress_is_a_fraction(cli: Cli, run: str, value: str) -> None:
    cli.ok("claim", run, actor="w1")
    before = dump(cli.store)
    outcome = cli("heartbeat", run, "--progress", value, "--json", actor="w1")
    assert outcome.code == 2
    assert "--progress" in outcome.error()["message"]
    assert dump(cli.store) == before


def test_evidence_timeout_zero_is_refused_not_an_hour(cli: Cli, run: str,
                                                      tmp_path: Path) -> None:
    cli.ok("claim", run, actor="w1")
    side = tmp_path / "SIDE"
    outcome = cli("evidence", "run", run, "--timeout", "0", *touch(side), actor="w1")
    assert outcome.code == 2
    assert "--timeout" in outcome.err
    assert not side.exists()


def test_the_library_refuses_what_the_flags_refuse(cli: Cli, run: str) -> None:
    from waypost.errors import InvalidInput
    from waypost.store import open_store
    from waypost.usecases.runs import Run
    from waypost.usecases.starting import start

    with open_store(str(cli.store)) as store:
        with pytest.raises(InvalidInput, match="max_silence"):
            start(store, "t", actor="alice", max_silence=float("nan"))
        with pytest.raises(InvalidInput, match="progress"):
            Run(store, run, actor="alice").heartbeat(progress=float("inf"))
        with pytest.raises(InvalidInput, match="actor"):
            Run(store, run, actor="")


@pytest.mark.parametrize("args", [
    ["start", "caf\udce9"],  # the byte 0xE9 of a Latin-1 "café", as Python receives it
    ["heartbeat", "RUN", "--note", "\udcff"],
    ["start", "t", "--as", "w\udcff"],
])
def test_arguments_that_are_not_utf8_are_refused(cli: Cli, run: str, args: list[str]) -> None:
    before = dump(cli.store)
    outcome = cli(*[run if a == "RUN" else a for a in args], "--json")
    assert outcome.code == 2
    assert "not valid UTF-8" in outcome.error()["message"]
    assert dump(cli.store) == before


@pytest.mark.parametrize(("args", "field"), [
    (["start", "x" * 501], "title"),
    (["heartbeat", "RUN", "--note", "n" * 4001], "note"),
    (["block", "RUN", "--kind", "other", "--detail", "d" * 4001], "detail"),
    (["cancel", "RUN", "--reason", "r" * 4001], "reason"),
    (["ready", "RUN", "--summary", "s" * 20_001], "summary"),
    (["evidence", "skip", "RUN", "--kind", "test", "--reason", "r" * 4001], "reason"),
])
def test_text_over_its_limit_is_refused_naming_the_field(cli: Cli, run: str, args: list[str],
                                                         field: str) -> None:
    cli.ok("claim", run, actor="alice")
    before = dump(cli.store)
    outcome = cli(*[run if a == "RUN" else a for a in args], "--json")
    assert outcome.code == 2, outcome.err
    assert outcome.error()["message"].startswith(f"{field} is ")
    assert dump(cli.store) == before


def test_text_at_its_limit_is_accepted(cli: Cli, run: str) -> None:
    cli.ok("claim", run, actor="w1")
    cli.ok("heartbeat", run, "--note", "n" * 4000, actor="w1")
    cli.ok("start", "x" * 500)


@pytest.mark.parametrize(("args", "actor"), [
    (["heartbeat", "RUN", "--as", ""], "alice"),
    (["claim", "RUN", "--as", "   "], "alice"),
    (["claim", "RUN", "--as", " w1 "], "alice"),
    (["claim", "RUN", "--as", "w\x1b]52;c;aGk=\x07"], "alice"),
    (["transfer", "RUN", "--authority", "approve", "--to", " x "], "alice"),
    (["transfer", "RUN", "--authority", "approve", "--to", ""], "alice"),
    (["start", "t", "--owner", ""], "alice"),
    (["start", "t", "--worker", "  "], "alice"),
    (["start", "t", "--idempotency-key", ""], "alice"),
    (["heartbeat", "RUN"], ""),  # WAYPOST_ACTOR set but empty
])
def test_blank_or_untrimmed_names_are_refused(cli: Cli, run: str, args: list[str],
                                              actor: str) -> None:
    before = dump(cli.store)
    outcome = cli(*[run if a == "RUN" else a for a in args], "--json", actor=actor)
    assert outcome.code == 2, outcome.err
    assert dump(cli.store) == before


def test_an_empty_as_never_acts_as_the_os_user(cli: Cli, run: str) -> None:
    """The run's owner is the OS user here; `--as ""` must not borrow that identity."""
    import getpass

    mine = cli.ok("start", "t", "--owner", getpass.getuser())
    outcome = cli("cancel", mine, "--reason", "x", "--as", "")
    assert outcome.code == 2
    assert cli("show", mine, "--json").json()["state"] == "in_progress"


@pytest.mark.parametrize("toml", [
    "limits = 5\n",
    "[runs]\nlong_running_after = nan\n",
    "[limits]\nmax_artifact_bytes = nan\n",
    "[limits]\nevidence_timeout = \"0s\"\n",
    "[limits]\nmin_artifact_bytes = true\n",
])
def test_a_bad_config_file_is_refused_with_exit_2(cli: Cli, run: str, tmp_path: Path,
                                                  toml: str) -> None:
    (tmp_path / "waypost.toml").write_text(toml)
    cli.ok("claim", run, actor="w1")
    outcome = cli("evidence", "run", run, "--json", "--", "true", actor="w1")
    assert outcome.code == 2, outcome.err
    assert "waypost.toml" in outcome.error()["message"]


def test_a_store_may_raise_a_text_limit_for_everyone(cli: Cli, run: str) -> None:
    cli.ok("claim", run, actor="w1")
    long_note = "n" * 5000
    assert cli("heartbeat", run, "--note", long_note, actor="w1").code == 2
    cli.ok("limits", "--set", "note=6000")
    cli.ok("heartbeat", run, "--note", long_note, actor="w1")
    assert cli("heartbeat", run, "--note", "n" * 6001, actor="w1").code == 2
    shown = cli("limits", "--json").json()["limits"]
    assert shown["note"] == {"fixed": 4000, "store": 6000}
    assert shown["title"] == {"fixed": 500, "store": None}


@pytest.mark.parametrize("change", ["note=100", "note=x", "nope=9000", "note", "note=99999999"])
def test_a_limit_is_raised_within_bounds_or_refused(cli: Cli, run: str, change: str) -> None:
    before = dump(cli.store)
    outcome = cli("limits", "--set", change, "--json")
    assert outcome.code == 2
    assert dump(cli.store) == before


@pytest.mark.parametrize("url", ["/sys/kernel/waypost.db", "/proc/1/none/waypost.db"])
def test_a_store_path_that_cannot_be_opened_is_exit_2(cli: Cli, url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from waypost.cli import main

    monkeypatch.setenv("WAYPOST_URL", url)
    assert main(["start", "t", "--json"]) == 2
    assert main(["init"]) == 2
