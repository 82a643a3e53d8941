"""Takeovers at every door, beyond the outcome class the table compares: what a late
worker's claim leaves in the store, and what a fenced process is told to do next.

- A worker whose process starts after the watchdog blocked its run as worker_silent
  takes it at any door (claim, or resume where a door has no claim) and leaves the same
  store: the run in progress under its lease, the silence ended with resume's events.
- A process fenced by a newer process of the same actor is told, at every door, that a
  newer process took the lease and to stop: no door offers it a claim (or a resume) as
  its next step, nor the current epoch to pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import waypost
from waypost.errors import StaleLease

from .conftest import BACKENDS, Doors
from .doors_local import run_cli
from .doors_mcp import McpStdioDoor
from .doors_web import HttpDoor
from .driver import Driver
from .table import OFFERS
from .terms import WORKER, Actor, Call, Cls, Ctx, Door, Op, Setup

TAKING_DOORS = (Door.SDK, Door.CLI, Door.HTTP, Door.MCP_STDIO, Door.MCP_HTTP)


def _cases() -> Iterator[object]:
    for backend in BACKENDS[:1]:  # the fencing on both stores: conformance (test_late_worker)
        for door in TAKING_DOORS:
            yield pytest.param(backend, door, id=f"{backend}-{door}")


@pytest.mark.parametrize(("backend", "door"), list(_cases()))
def test_a_late_workers_claim_leaves_the_same_store_at_every_door(
        backend: str, door: Door, doors: Doors) -> None:
    driver = doors.get(door, backend)
    ctx = driver.world.build(Setup.SILENT, driver)
    store = driver.world.store
    since = store.get(ctx.run).version
    op = Op.CLAIM if Op.CLAIM in OFFERS[door] else Op.RESUME
    assert driver.call(op, Call(Actor.WORKER, ctx)) is Cls.OK
    packet = store.get(ctx.run)
    assert packet.state == "in_progress", f"{door}'s {op} left the run {packet.state}"
    assert not packet.open_blockers
    assert packet.worker is not None
    assert (packet.worker.actor, packet.worker.epoch) == (WORKER, 1)
    [silent] = packet.blockers
    assert (silent.kind, silent.resolved_by) == ("worker_silent", WORKER)
    assert [(e.type, e.actor) for e in store.events(ctx.run) if e.seq > since] == [
        ("claimed", WORKER), ("blocker_resolved", WORKER)]


# --- what a fenced process is told ---------------------------------------------------------


def _sdk(driver: Driver, ctx: Ctx) -> dict[str, Any]:
    with pytest.raises(StaleLease) as info:
        waypost.Run(driver.world.store, ctx.run, actor=WORKER, epoch=ctx.epoch).heartbeat()
    exc = info.value
    return {"code": exc.code, "message": exc.message, "hint": exc.hint,
            "next": [{"verb": s.verb, "args": dict(s.args), "fill": list(s.fill)}
                     for s in exc.steps]}


def _cli(driver: Driver, ctx: Ctx) -> dict[str, Any]:
    code, _, err = run_cli(["heartbeat", ctx.run, "--json", "--store", driver.world.url,
                            "--as", WORKER, "--epoch", str(ctx.epoch)])
    assert code == 3, err
    error: dict[str, Any] = json.loads(err)["error"]
    return error


def _http(driver: Driver, ctx: Ctx) -> dict[str, Any]:
    assert isinstance(driver, HttpDoor)
    response = driver.post(Call(Actor.WORKER, ctx), f"/api/runs/{ctx.run}/heartbeat",
                           {"epoch": ctx.epoch})
    assert response.status_code >= 400, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def _mcp(driver: Driver, ctx: Ctx) -> dict[str, Any]:
    """The server holds the epoch it resumed at (`hold`), older than w1's claim since."""
    assert isinstance(driver, McpStdioDoor)
    session = driver.session(Actor.WORKER)
    result = driver.portal.call(driver._bounded, session, "heartbeat", {"run": ctx.run})
    assert result.is_error
    document = dict(result.structured_content or {})
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    return {**document["error"], "next": document.get("next"), "also": document.get("also"),
            "text": text}


ANSWER = {Door.SDK: _sdk, Door.CLI: _cli, Door.HTTP: _http, Door.MCP_STDIO: _mcp,
          Door.MCP_HTTP: _mcp}


def _verbs(answer: dict[str, Any]) -> list[str]:
    """The verbs (or tools) the answer names as next steps."""
    steps = answer["next"] if isinstance(answer["next"], list) else [
        answer["next"], *(answer.get("also") or [])]
    return [s.get("verb") or s.get("tool") for s in steps if s]


@pytest.mark.parametrize(("backend", "door"), list(_cases()))
def test_a_fenced_process_is_told_to_stop_at_every_door(backend: str, door: Door,
                                                        doors: Doors) -> None:
    driver = doors.get(door, backend)
    ctx = driver.world.build(Setup.RESTARTED, driver)
    lease = driver.world.store.get(ctx.run).worker
    assert lease is not None
    assert lease.actor == WORKER
    answer = ANSWER[door](driver, ctx)
    assert answer["code"] == "stale_lease"
    assert f"a newer process of {WORKER} took the lease (epoch {lease.epoch})" in (
        answer["message"])
    assert "only if that process is gone" in answer["hint"]
    verbs = _verbs(answer)
    assert verbs, f"{door} names no next step"
    assert not set(verbs) & {"claim", "resume"}, f"{door} tells the fenced process {verbs}"
    shown = json.dumps(answer)
    for never in (f"--epoch {lease.epoch}", f'"epoch": {lease.epoch}',
                  f'"epoch": "{lease.epoch}"', "waypost claim", "waypost resume",
                  "next tool: resume"):
        assert never not in shown, f"{door} hands the fenced process {never!r}: {shown}"
