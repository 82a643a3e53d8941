"""The fast parser of the hot verbs accepts a strict subset of what click accepts, and gives
the verb exactly the values click would."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from unittest import mock

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waypost.cli import hot
from waypost.cli.app import cli as group
from waypost.cli.context import parse
from waypost.errors import WaypostError

ENV = {"WAYPOST_URL": None, "WAYPOST_EPOCH": None}


@contextlib.contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with these variables set (None: removed), as click reads it."""
    with mock.patch.dict(os.environ):
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield


def fast(argv: Sequence[str], env: Mapping[str, str | None] = ENV) -> dict[str, Any] | None:
    with environment(env):
        return parse(hot.HOT[argv[0]], argv[1:])


def with_click(argv: Sequence[str], env: Mapping[str, str | None] = ENV) -> Any:
    """The values click hands the verb, or the name of the exception it raises instead."""
    command = group.commands[argv[0]]
    with environment(env), contextlib.redirect_stdout(None):
        try:
            return command.make_context(argv[0], list(argv[1:])).params
        except (click.ClickException, click.exceptions.Exit, WaypostError) as exc:
            return type(exc).__name__


@pytest.mark.parametrize("argv", [
    ["heartbeat", "wp_1"],
    ["heartbeat", "wp_1", "--note", "drafting", "--progress", "0.5", "--epoch", "2"],
    ["heartbeat", "--note=a=b", "wp_1", "--progress=1e-1", "--epoch=3", "--json"],
    ["heartbeat", "", "--note", "", "--as", "w1", "--store", "sqlite:///w.db"],
    ["block", "wp_1", "--kind", "missing_input", "--detail", "the API key"],
    ["show", "wp_1", "--md", "--public", "--json"],
    ["ls"],
    ["ls", "--state", "blocked", "--state=approved,delivered", "--all", "--limit", "7"],
])
def test_plain_command_lines_run_fast_with_clicks_values(argv: list[str]) -> None:
    values = fast(argv)
    assert values is not None
    assert values == with_click(argv)


@pytest.mark.parametrize("argv", [
    ["heartbeat"],  # RUN is missing
    ["heartbeat", "wp_1", "wp_2"],
    ["heartbeat", "wp_1", "--help"],
    ["heartbeat", "wp_1", "-h"],
    ["heartbeat", "wp_1", "--bogus"],
    ["heartbeat", "wp_1", "--no"],  # no prefix matching
    ["heartbeat", "wp_1", "--note"],
    ["heartbeat", "wp_1", "--note", "-1"],  # click reads it as the value; left to click
    ["heartbeat", "wp_1", "--note", "a", "--note", "b"],
    ["heartbeat", "wp_1", "--progress", "half"],
    ["heartbeat", "wp_1", "--epoch", "1.5"],
    ["heartbeat", "wp_1", "--json=yes"],
    ["heartbeat", "--", "wp_1"],
    ["heartbeat", "-"],
    ["block", "wp_1", "--detail", "x"],
    ["block", "wp_1", "--kind", "other"],  # --detail is required
    ["block", "wp_1", "--kind", "OTHER", "--detail", "x"],
    ["ls", "--all", "--all"],
    ["ls", "--limit", "many"],
])
def test_anything_else_is_left_to_click(argv: list[str]) -> None:
    assert fast(argv) is None


def test_environment_variables_are_read_as_click_reads_them() -> None:
    argv = ["heartbeat", "wp_1"]
    for env in ({"WAYPOST_EPOCH": "4", "WAYPOST_URL": "w.db"},
                {"WAYPOST_EPOCH": "", "WAYPOST_URL": ""}):
        values = fast(argv, env)
        assert values is not None
        assert values == with_click(argv, env)
    assert fast(argv, {"WAYPOST_EPOCH": "four"}) is None
    # the parser every door shares refuses it, in its own words (exit 2)
    assert with_click(argv, {"WAYPOST_EPOCH": "four"}) == "InvalidInput"


def test_shell_completion_is_left_to_click() -> None:
    with environment({"_WAYPOST_COMPLETE": "bash_complete"}):
        assert hot.hot_values(["heartbeat", "wp_1"]) is None
    assert hot.hot_values(["heartbeat", "wp_1"]) is not None
    assert hot.hot_values(["claim", "wp_1"]) is None
    assert hot.hot_values([]) is None


TOKENS = ["wp_2", "", "-", "--", "-h", "--help", "--bogus", "--note=n", "--epoch=x", "--json",
          "--json=1", "--md", "--public", "--all"]
NAMES = ["--note", "--progress", "--epoch", "--as", "--store", "--kind", "--detail", "--state",
         "--owner", "--limit"]
VALUES = ["x", "", "-1", "0.5", "1e3", "2", "other", "nope", "blocked,in_progress", "--json"]
PIECES = st.one_of(st.sampled_from(TOKENS).map(lambda t: [t]),
                   st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)).map(list))


@settings(max_examples=400, deadline=None)
@given(verb=st.sampled_from(sorted(hot.HOT)),
       pieces=st.lists(PIECES, max_size=4),
       run_at=st.integers(min_value=-1, max_value=4),
       epoch=st.sampled_from([None, "", "3", "x"]),
       url=st.sampled_from([None, "", "w.db"]),
       complete=st.booleans())
def test_whatever_the_fast_parser_accepts_click_reads_the_same(
        verb: str, pieces: list[list[str]], run_at: int, epoch: str | None,
        url: str | None, complete: bool) -> None:
    if complete:  # the required options too, with a valid value: else `block` is never run
        pieces += [[o.name, o.choices[0] if o.choices else "x"] for o in hot.HOT[verb].options
                   if o.required]
    if run_at >= 0 and hot.HOT[verb].args:
        pieces.insert(run_at, ["wp_1"])
    argv = [verb, *(token for piece in pieces for token in piece)]
    env = {"WAYPOST_EPOCH": epoch, "WAYPOST_URL": url}
    values = fast(argv, env)
    if values is not None:
        assert values == with_click(argv, env)
