"""A refusal's next step names something that exists at the door that refused: at MCP a
tool of the server's tool list (never a CLI command, never a tool it lacks), at the HTTP
API a route of its OpenAPI document. Every verb a step may name (`waypost.errors.VERBS`)
is checked at both doors, and so are the refusals of the handoff, as each door answers
them: taking a live lease (the owner's to transfer), writing without the lease (claim it),
ending a silence (resume), approving as the worker (the owner's to transfer), claiming a
run that is not there (list the runs), a retarget naming no target (retarget, with one)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mcp.types import TextContent

from waypost.errors import VERBS, Step, step
from waypost.http.errors import next_route
from waypost.mcp.answers import next_call

from .conftest import BACKENDS, Doors
from .doors_mcp import McpStdioDoor
from .doors_web import HttpDoor
from .named import NO_DOOR, routes, template
from .terms import Actor, Call, Ctx, Door, Setup
from .world import World

RUN = "wp_01nextstepsrun0000000000"


def every_step() -> Iterator[Step]:
    """A step of every verb, and of each form of `evidence` (run, check, skip)."""
    for verb in sorted(VERBS):
        yield step(verb, None if verb in ("list", "start", "deliver") else RUN)
    yield step("evidence", RUN, check="no-private")
    yield step("evidence", RUN, kind="test", fill=["reason"])


def _tools(doors: Doors) -> set[str]:
    driver = doors.get(Door.MCP_STDIO, "sqlite")
    assert isinstance(driver, McpStdioDoor)
    listed = driver.portal.call(driver.session(Actor.OWNER).list_tools)
    return {tool.name for tool in listed.tools}


def test_every_verb_is_a_tool_of_the_mcp_server(doors: Doors) -> None:
    tools = _tools(doors)
    for each in every_step():
        tool = next_call(each)["tool"]
        if each.verb in NO_DOOR:
            assert tool is None, f"{each.verb} names {tool}, which no caller drives"
        else:
            assert tool in tools, f"a {each.verb} step names the tool {tool!r}: not listed"


def test_every_verb_is_a_route_of_the_openapi_document() -> None:
    known = routes()
    for each in every_step():
        route = next_route(each)
        if each.verb in NO_DOOR:
            assert (route.method, route.path) == (None, None), each.verb
            continue
        assert route.method is not None, each.verb
        assert route.path is not None, each.verb
        found = template(route.method, route.path)
        assert found in known, f"a {each.verb} step names {found}: no such route"


# --- the handoff's refusals, as the doors answer them ----------------------------------


def _took_over(world: World, ctx: Ctx) -> Ctx:
    world.as_owner(ctx.run).claim()  # w1 no longer holds the lease
    return ctx


# (who, the setup, what is asked: an MCP tool and its arguments, an HTTP route and its
# body, the verb the door must name as a next step)
REFUSALS: list[tuple[str, Actor, Setup, Callable[[World, Ctx], Ctx], str, dict[str, Any],
                     str, dict[str, Any], str]] = [
    ("a stranger takes a live lease", Actor.STRANGER, Setup.WORKING, lambda w, c: c,
     "claim", {}, "claim", {}, "transfer"),
    ("w1 writes after the owner took the lease", Actor.WORKER, Setup.WORKING, _took_over,
     "heartbeat", {"note": "still here"}, "heartbeat", {"note": "still here"}, "read"),
    ("w1 resolves the silence itself", Actor.WORKER, Setup.SILENT, lambda w, c: c,
     "unblock", {"resolution": "I am back"}, "unblock", {"resolution": "I am back"},
     "resume"),
    ("w1 approves its own result", Actor.WORKER, Setup.REVIEWED, lambda w, c: c,
     "approve", {}, "approve", {}, "transfer"),
    ("w1 claims a run that is not there", Actor.WORKER, Setup.MISSING, lambda w, c: c,
     "claim", {}, "claim", {}, "list"),
    ("the owner retargets to nothing", Actor.OWNER, Setup.WORKING, lambda w, c: c,
     "retarget", {}, "retarget", {}, "retarget"),
]
# at a token door the token's role refuses these first (a worker token approves nothing; an
# owner token acts on its holder's runs alone), before the run's rules name a next step
LOCAL_ONLY = {"a stranger takes a live lease", "w1 approves its own result"}


def _cases() -> Iterator[object]:
    for backend in BACKENDS[:1]:  # the words are the doors'; the store's part: conformance
        for door in (Door.MCP_STDIO, Door.MCP_HTTP, Door.HTTP):
            for refusal in REFUSALS:
                if door is not Door.MCP_STDIO and refusal[0] in LOCAL_ONLY:
                    continue
                yield pytest.param(backend, door, refusal,
                                   id=f"{backend}-{door}-{refusal[0].replace(' ', '_')}")


def _mcp(driver: McpStdioDoor, actor: Actor, tool: str, arguments: dict[str, Any]
         ) -> tuple[list[dict[str, Any]], str]:
    session = driver.session(actor)
    result = driver.portal.call(driver._bounded, session, tool, arguments)
    assert result.is_error, f"{tool} was not refused"
    document = dict(result.structured_content or {})
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    steps = [document["next"], *document.get("also", [])] if document.get("next") else []
    return steps, text


@pytest.mark.parametrize(("backend", "door", "refusal"), list(_cases()))
def test_each_handoff_refusal_names_a_next_step_of_its_own_door(
        backend: str, door: Door, refusal: Any, doors: Doors) -> None:
    what, actor, setup, then, tool, arguments, route, body, verb = refusal
    driver = doors.get(door, backend)
    ctx = then(driver.world, driver.world.build(setup, driver))
    if tool == "unblock":
        arguments, body = {**arguments, "blocker": ctx.blocker}, {**body, "blocker": ctx.blocker}
    if door is Door.HTTP:
        assert isinstance(driver, HttpDoor)
        response = driver.post(Call(actor, ctx), f"/api/runs/{ctx.run}/{route}", body)
        assert response.status_code >= 400, f"{what}: {response.text}"
        error = response.json()["error"]
        steps = [s for s in (error.get("next"), *error.get("also", [])) if s]
        known = routes()
        for each in steps:
            assert each["method"] is not None, f"{what}: {each['verb']} has no route"
            found = template(each["method"], each["path"])
            assert found in known, f"{what}: the next step {found} is no route"
        assert verb in [s["verb"] for s in steps], f"{what}: {error}"
        return
    assert isinstance(driver, McpStdioDoor)
    steps, text = _mcp(driver, actor, tool, {"run": ctx.run, **arguments})
    tools = _tools_of(driver)
    for each in steps:
        assert each["tool"] in tools, f"{what}: the next step names {each['tool']!r}"
    assert verb in [s["verb"] for s in steps], f"{what}: {text}"
    named = text.split("next tool: ")[-1].split()[0]
    assert named in tools, f"{what}: the text names the tool {named!r}"
    assert "no tool of this server" not in text, text
    assert "waypost " not in text, f"{what}: a CLI command at MCP: {text}"


def _tools_of(driver: McpStdioDoor) -> set[str]:
    listed = driver.portal.call(driver.session(Actor.OWNER).list_tools)
    return {tool.name for tool in listed.tools}
