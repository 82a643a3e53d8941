"""Generated bad numbers at every door that takes a number: NaN, infinities, negatives,
zero where a duration must pass, huge values (1e308, 2**63, ten years and a day), empty
and non-numeric text. Each must be refused as bad input (CLI exit 2 `invalid_input`; HTTP
400 for JSON that is malformed (NaN) or off the schema, 422 from the parser; an MCP tool
error; the library's InvalidInput) and leave the door's store exactly as it was. A start
parameter is refused in the same words at every door."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.door_support import ACTOR, Answer, Door, Doors, every_door
from waypost import Run
from waypost.errors import WaypostError

TEN_YEARS = 3653 * 86400
EXAMPLES = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# --- bad numbers, decided here without the parsers under test --------------------------------

WORDS = st.sampled_from(["", " ", "soon", "1x", "m", "0x10", "1e", "--5", "½", "1,5", "five"])
NOT_FINITE = st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity",
                              "-Infinity"])
NEGATIVE = st.one_of(st.floats(max_value=-1e-6, allow_infinity=False).map(repr),
                     st.integers(max_value=-1).map(str),
                     st.sampled_from(["-5m", "-1s", "-0.5"]))
HUGE = st.one_of(st.floats(min_value=TEN_YEARS + 1, allow_infinity=False).map(repr),
                 st.integers(min_value=TEN_YEARS + 1).map(str),
                 st.sampled_from(["1e308", "1e309", str(2**63), "99999999999999999999999d",
                                  "3654d", "522w", "87673h"]))
ZERO = st.sampled_from(["0", "0s", "0.0", "0m", "0e5"])
# not a duration above zero; and not one of zero or more (a relative deadline may be +0)
BAD_POSITIVE = st.one_of(WORDS, NOT_FINITE, NEGATIVE, HUGE, ZERO)
BAD_DURATION = st.one_of(WORDS, NOT_FINITE, NEGATIVE, HUGE)

NOT_JSON = st.sampled_from([float("nan"), float("inf"), float("-inf")])  # JSON has none
BAD_FRACTION = st.one_of(
    st.floats(max_value=-1e-9), st.floats(min_value=1 + 1e-9), NOT_JSON,
    st.sampled_from([1e308, -0.5, 2, 2**63, "", "x", "nan", "1e308", "-0.0001"]))
BAD_EPOCH = st.one_of(
    st.integers(max_value=0), st.integers(min_value=2**62 + 1),
    st.sampled_from([2**63, 10**30, "", "x", "1.5", "-1", "nan"]))
BAD_LIMIT = st.one_of(st.integers(max_value=0), st.integers(min_value=10_001),
                      st.sampled_from(["", "x", "nan", "1e3", "-1", "99999999999999999999"]))
BAD_TIMEOUT = st.one_of(st.floats(max_value=0), st.floats(min_value=TEN_YEARS + 1), NOT_JSON)

DURATION_FLAGS = ("expect", "heartbeat_interval", "max_silence", "review_within")


# --- the doors, each with a run its actor works on -----------------------------------------


@dataclass
class World:
    doors: Doors
    runs: dict[str, str]  # door → the run its actor works on (lease epoch 1)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with every_door(tmp_path_factory.mktemp("numbers")) as doors:
        params = {"title": "Import orders", "owner": ACTOR, "worker": ACTOR,
                  "target": "none:", "kind": "long_running", "max_silence": "1h"}
        runs = {}
        for door in doors.all():
            started = door.start(params)
            assert started.document is not None, started
            runs[door.name] = started.document["run"]
        yield World(doors, runs)


def refused(door: Door, call: Callable[[], Answer]) -> Answer:
    """`call`'s answer, once it is known to be a refusal as bad input that changed
    nothing in the door's store."""
    before = door.dump()
    answer = call()
    assert not answer.ok, f"{door.name} took it: {answer}"
    assert "unexpected" not in answer.message, f"{door.name}: {answer}"
    if door.name == "cli":
        assert (answer.status, answer.code) == (2, "invalid_input"), answer
    elif door.name == "http":
        assert (answer.status, answer.code) in ((400, "bad_request"), (400, "invalid_request"),
                                                (422, "invalid_input")), answer
    elif door.name == "sdk":
        assert answer.code == "invalid_input", answer
    assert door.dump() == before, f"{door.name} changed its store: {answer}"
    return answer


def sdk(work: Callable[[], object]) -> Answer:
    try:
        work()
    except WaypostError as exc:
        return Answer(code=exc.code, message=exc.message)
    return Answer(document={})


# --- start: the same words at every door ---------------------------------------------------


def refused_alike(world: World, params: dict[str, Any]) -> str:
    """What every door said refusing to start with `params`: the same words at each."""
    said = {}
    for door in world.doors.all():
        said[door.name] = refused(door, functools.partial(door.start, params)).message
    assert len(set(said.values())) == 1, said
    return said["cli"]



@EXAMPLES
@given(flag=st.sampled_from(DURATION_FLAGS), value=BAD_POSITIVE)
def test_a_bad_duration_is_refused_alike_at_every_door(world: World, flag: str,
                                                       value: str) -> None:
    said = refused_alike(world, {"title": "t", "kind": "long_running", "target": "none:",
                                 flag: value})
    assert said.startswith(f"{flag}: "), said


@EXAMPLES
@given(value=BAD_DURATION)
def test_a_bad_relative_deadline_is_refused_alike_at_every_door(world: World,
                                                                value: str) -> None:
    said = refused_alike(world, {"title": "t", "kind": "long_running", "target": "none:",
                                 "max_silence": "1h", "deadline": "+" + value})
    assert said.startswith("deadline: "), said


# --- the worker's numbers ------------------------------------------------------------------


@EXAMPLES
@given(value=BAD_FRACTION)
def test_a_bad_progress_is_refused_at_every_door(world: World, value: Any) -> None:
    doors, runs = world.doors, world.runs
    refused(doors.cli, lambda: doors.cli("heartbeat", runs["cli"], f"--progress={value}",
                                         "--epoch=1"))
    refused(doors.http, lambda: doors.http.post(f"/api/runs/{runs['http']}/heartbeat",
                                                {"progress": value, "epoch": 1}))
    handle = Run(doors.sdk.opened, runs["sdk"], actor=ACTOR, epoch=1)
    refused(doors.sdk, lambda: sdk(lambda: handle.heartbeat(progress=value)))
    if not isinstance(value, float) or math.isfinite(value):
        # the client writes NaN and infinity as null (JSON has neither), which is no progress
        refused(doors.mcp, lambda: doors.mcp.call("heartbeat", run=runs["mcp"],
                                                  progress=value))


@EXAMPLES
@given(value=BAD_EPOCH)
def test_a_bad_epoch_is_refused_as_bad_input_not_as_a_stale_lease(world: World,
                                                                  value: Any) -> None:
    doors, runs = world.doors, world.runs
    refused(doors.cli, lambda: doors.cli("heartbeat", runs["cli"], f"--epoch={value}"))
    refused(doors.http, lambda: doors.http.post(f"/api/runs/{runs['http']}/heartbeat",
                                                {"epoch": value}))
    refused(doors.sdk, lambda: sdk(lambda: Run(doors.sdk.opened, runs["sdk"], actor=ACTOR,
                                               epoch=value).heartbeat()))


@EXAMPLES
@given(value=BAD_LIMIT)
def test_a_bad_row_limit_is_refused(world: World, value: Any) -> None:
    refused(world.doors.cli, lambda: world.doors.cli("ls", f"--limit={value}"))
    refused(world.doors.http, lambda: world.doors.http.get("/api/runs", limit=value))


@EXAMPLES
@given(value=BAD_TIMEOUT)
def test_a_bad_evidence_timeout_is_refused_before_anything_runs(world: World,
                                                                value: float) -> None:
    doors, runs = world.doors, world.runs
    refused(doors.cli, lambda: doors.cli("evidence", "run", runs["cli"], f"--timeout={value!r}",
                                         "--epoch=1", "--", "true"))
    handle = Run(doors.sdk.opened, runs["sdk"], actor=ACTOR, epoch=1)
    refused(doors.sdk, lambda: sdk(lambda: handle.record_command(["true"], timeout=value)))
    if math.isfinite(value):  # JSON carries finite numbers only
        refused(doors.mcp, lambda: doors.mcp.call("run_evidence", run=runs["mcp"],
                                                  command=["true"], timeout=value))
