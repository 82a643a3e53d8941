"""Start parameters through every door: the CLI (in-process), the library, MCP over stdio
(the official client) and the HTTP API (a real server) are given the same parameters, and
each must record the same packet fields (kind, stop rules, the deadline counted from the
run's start, gates) or refuse with the same error and the same words, leaving its store
as it was. One table, and what every door must answer for each row."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import ANY

import pytest

from tests.door_support import ACTOR, Answer, Doors, every_door

AT = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
BASE = {"title": "Fix the flaky test", "owner": ACTOR, "worker": ACTOR, "target": "none:"}
RECORDED: dict[str, Any] = {"kind": "bounded", "owner": ACTOR, "worker": ACTOR, "target": "none:",
            "heartbeat_interval": None, "max_silence": None, "review_within": None,
            "deadline": None, "deadline_in": None, "gates": []}

# (what every door is given, beyond BASE; what every packet must hold, beyond RECORDED)
STARTED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "short expect is bounded": ({"expect": "2m"}, {}),
    "long expect is long_running": (
        {"expect": "2h", "max_silence": "30m"},
        {"kind": "long_running", "max_silence": 1800}),
    "explicit kind beats expect": ({"kind": "bounded", "expect": "3h"}, {}),
    "every stop rule and gates": (
        {"kind": "long_running", "deadline": "+4h", "heartbeat_interval": "5m",
         "max_silence": "1h30m", "review_within": "1d",
         "gates": ["tests=command:pytest -q", "draft?=artifact:draft.md", "clean=no-private"]},
        {"kind": "long_running", "deadline": ANY, "deadline_in": 4 * 3600,
         "heartbeat_interval": 300, "max_silence": 5400, "review_within": 86400,
         "gates": [["tests", "command:pytest -q", True], ["draft", "artifact:draft.md", False],
                   ["clean", "no-private", True]]}),
    "an ISO deadline": (
        {"kind": "long_running", "deadline": AT.isoformat(), "max_silence": "90s"},
        {"kind": "long_running", "deadline": AT, "deadline_in": ANY, "max_silence": 90}),
    "seconds as a bare number": (
        {"kind": "long_running", "max_silence": "600", "heartbeat_interval": "0.5"},
        {"kind": "long_running", "max_silence": 600, "heartbeat_interval": 0.5}),
}

TOO_FAR = "must be above 0 and at most 3653d (ten years)"
# (what every door is given, beyond BASE; the refusal's code and message)
REFUSED: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    "a word for a duration": ({"expect": "soon"}, ("invalid_input", "expect: bad duration 'soon'")),
    "an empty duration": ({"max_silence": ""}, ("invalid_input", "max_silence: bad duration ''")),
    "NaN": ({"max_silence": "nan"}, ("invalid_input", f"max_silence: duration 'nan' {TOO_FAR}")),
    "infinity": ({"heartbeat_interval": "inf"},
                 ("invalid_input", f"heartbeat_interval: duration 'inf' {TOO_FAR}")),
    "zero": ({"review_within": "0"}, ("invalid_input", f"review_within: duration '0' {TOO_FAR}")),
    "negative": ({"expect": "-5"}, ("invalid_input", f"expect: duration '-5' {TOO_FAR}")),
    "huge": ({"max_silence": "1e308"},
             ("invalid_input", f"max_silence: duration '1e308' {TOO_FAR}")),
    "a bad relative deadline": ({"deadline": "+2x"},
                                ("invalid_input", "deadline: bad duration '2x'")),
    "a word for a deadline": ({"deadline": "tomorrow"},
                              ("invalid_input", "deadline: bad deadline 'tomorrow'")),
    "a deadline past ten years": (
        {"deadline": "9999-12-31T23:59:59"},
        ("invalid_input", "deadline: deadline '9999-12-31T23:59:59' is more than ten years away")),
    "a gate without a check": ({"gates": ["tests"]}, ("invalid_input", "bad gate 'tests'")),
    "a gate of an unknown kind": ({"gates": ["t=bogus:x"]},
                                  ("invalid_input", "bad check 'bogus:x'")),
    "long_running without a target": (
        {"kind": "long_running", "target": None, "max_silence": "1h"},
        ("rule_violation", ANY)),
}


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    with every_door(tmp_path_factory.mktemp("doors")) as opened:
        yield opened


def given(extra: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**BASE, **extra}.items() if v is not None}


def recorded(answer: Answer) -> dict[str, Any]:
    """The packet fields a start decides, from any door's answer."""
    assert answer.document is not None, answer
    packet = answer.document["packet"]
    rules = packet["stop_rules"]
    deadline = rules.get("deadline") and datetime.fromisoformat(rules["deadline"])
    started = datetime.fromisoformat(packet["created_at"])
    return {"kind": packet["kind"], "owner": packet["owner"], "target": packet["target"],
            "worker": (packet.get("worker") or {}).get("actor"),
            "heartbeat_interval": rules.get("heartbeat_interval"),
            "max_silence": rules.get("max_silence"), "review_within": rules.get("review_within"),
            "deadline": deadline or None,
            "deadline_in": (deadline - started).total_seconds() if deadline else None,
            "gates": [[g["name"], g["check"], g.get("required", True)] for g in packet["gates"]]}


@pytest.mark.parametrize("case", STARTED, ids=str)
def test_every_door_records_the_same_start(doors: Doors, case: str) -> None:
    extra, expected = STARTED[case]
    for door in doors.all():
        answer = door.start(given(extra))
        assert answer.ok, f"{door.name}: {answer}"
        assert recorded(answer) == {**RECORDED, **expected}, door.name


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_every_door_refuses_the_same_start_in_the_same_words(doors: Doors, case: str) -> None:
    extra, (code, message) = REFUSED[case]
    said: dict[str, str] = {}
    for door in doors.all():
        before = door.dump()
        answer = door.start(given(extra))
        assert not answer.ok, f"{door.name} took it: {answer}"
        assert answer.code == (None if door is doors.mcp else code), f"{door.name}: {answer}"
        assert answer.message == message, f"{door.name}: {answer}"
        assert door.dump() == before, door.name
        said[door.name] = answer.message
    assert len(set(said.values())) == 1, said


def test_an_idempotency_key_means_the_same_at_every_door(doors: Doors) -> None:
    params = given({"kind": "long_running", "deadline": "+1h", "max_silence": "10m"})
    for door in doors.all():
        first = door.start(params, key="nightly-7")
        again = door.start(params, key="nightly-7")
        assert first.document is not None, door.name
        assert again.document is not None, door.name
        assert (first.document["created"], again.document["created"]) == (True, False)
        assert again.document["run"] == first.document["run"], door.name
        before = door.dump()
        other = door.start({**params, "max_silence": "20m"}, key="nightly-7")
        assert other.code == (None if door is doors.mcp else "idempotency_conflict"), other
        assert first.document["run"] in other.message, door.name
        assert door.dump() == before, door.name

