"""The CLI's binding of an answer to what was reviewed: `review` prints the digest and the
next command carrying it, `show` shows it, `approve` and `changes --reviewed` refuse a
result that has changed since (exit 5, what changed, the store unchanged)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import Cli
from tests.integration.test_review import history, ready_run

DIGEST = re.compile(r"reviewed result: (sha256:[0-9a-f]{64}) \(approve with --reviewed "
                    r"([0-9a-f]{12})\)")


def _review(cli: Cli, run: str) -> tuple[str, str, str]:
    """The review's digest as printed (whole and short), and its next command."""
    outcome = cli("review", run)
    assert outcome.code == 0, outcome.err
    found = DIGEST.search(outcome.out)
    assert found is not None, outcome.out
    return found.group(1), found.group(2), outcome.err


def test_review_prints_the_digest_and_approve_binds_to_it(cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, "tests=command:true")
    digest, short, said = _review(cli, run)
    assert digest.removeprefix("sha256:").startswith(short)
    assert f"next: waypost approve {run} --reviewed {short} --as alice" in said
    assert cli("review", run, "--json").json()["reviewed"].startswith("sha256:")
    digest, short, _ = _review(cli, run)
    assert f"reviewed   {digest}" in cli.ok("show", run)
    cli.ok("approve", run, "--reviewed", short)
    assert f"result {digest}" in cli.ok("show", run)
    [approved] = [e for e in cli("log", run, "--json").json()["events"]
                  if e["data"]["type"] == "approved"]
    assert approved["data"]["reviewed"] == digest


def test_an_answer_to_an_earlier_review_is_refused_saying_what_changed(
        cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, "tests=command:true")
    _, old, _ = _review(cli, run)
    _, new, _ = _review(cli, run)
    before = history(cli, run)
    for answer in (("approve", run, "--reviewed", old),
                   ("changes", run, "--reason", "not yet", "--reviewed", old)):
        refused = cli(*answer, "--json")
        assert refused.code == 5
        error = refused.error()
        assert error["code"] == "result_changed"
        assert "alice ran a review" in error["message"]
        assert new in error["message"]
        assert f"waypost {answer[0]} {run}" in error["hint"]
        assert f"--reviewed {new}" in error["hint"]
        assert history(cli, run) == before
    assert cli("approve", run, "--reviewed", "not-a-digest").code == 2
    assert history(cli, run) == before
    cli.ok("changes", run, "--reason", "one more test", "--reviewed", new)


def test_help_says_where_the_digest_comes_from(cli: Cli) -> None:
    for verb in ("approve", "changes"):
        said = " ".join(cli(verb, "--help").out.split())
        assert "--reviewed DIGEST" in said
        assert "as `waypost review` prints it" in said
