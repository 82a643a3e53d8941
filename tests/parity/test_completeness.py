"""The table covers every door: a command, tool, route, board action or role operation
added without a line in the table (or a reason in NOT_OPERATIONS) fails here, and so does a
door whose driver and `OFFERS` disagree, or an offered operation no scenario lets through."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from waypost.cli.app import cli
from waypost.core.access import Operation
from waypost.http import board
from waypost.http.app import create_app
from waypost.http.settings import ServerConfig
from waypost.usecases import tokens

from .conftest import BACKENDS, Doors
from .doors import DRIVERS
from .doors_mcp import McpStdioDoor
from .driver import offered
from .surfaces import CLI_COMMANDS, HTTP_ROUTES, MCP_TOOLS, NOT_OPERATIONS
from .table import OFFERS, SCENARIOS
from .terms import OPERATION_OF, TOKEN_DOORS, Actor, Cls, Door, Op

ANSWERS = (Cls.OK, Cls.MAY_STOP, Cls.GO_ON)


def cli_commands(group: click.Group, ctx: click.Context, prefix: str = "") -> Iterator[str]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from cli_commands(command, ctx, f"{prefix}{name} ")
        else:
            yield prefix + name


def test_every_cli_command_is_an_operation_of_the_table_or_says_why_not() -> None:
    commands = set(cli_commands(cli, click.Context(cli)))
    unknown = commands - CLI_COMMANDS.keys() - NOT_OPERATIONS.keys()
    assert not unknown, f"CLI commands the parity table does not know: {sorted(unknown)}"
    assert CLI_COMMANDS.keys() <= commands, "the table names CLI commands that are gone"
    for command, op in CLI_COMMANDS.items():
        assert op in OFFERS[Door.CLI] | OFFERS[Door.HOOK_CLI], command


def test_every_mcp_tool_is_an_operation_of_the_table(doors: Doors) -> None:
    driver = doors.get(Door.MCP_STDIO, "sqlite")
    assert isinstance(driver, McpStdioDoor)
    listed = driver.portal.call(driver.session(Actor.OWNER).list_tools)
    tools = {tool.name for tool in listed.tools}
    assert tools == MCP_TOOLS.keys(), "MCP tools and the parity table differ"
    covered = set().union(*MCP_TOOLS.values())
    assert covered == OFFERS[Door.MCP_STDIO] == OFFERS[Door.MCP_HTTP]


def test_every_api_route_is_an_operation_of_the_table_or_says_why_not() -> None:
    document = create_app(ServerConfig(store_url="unused")).openapi_schema
    routes = {f"{method.upper()} {path}" for path, item in (document.paths or {}).items()
              for method in ("get", "post", "put", "patch", "delete")
              if getattr(item, method, None) is not None}
    unknown = routes - HTTP_ROUTES.keys() - NOT_OPERATIONS.keys()
    assert not unknown, f"API routes the parity table does not know: {sorted(unknown)}"
    assert HTTP_ROUTES.keys() <= routes, "the table names API routes that are gone"
    covered = set().union(*(ops for route, ops in HTTP_ROUTES.items() if "/hooks/" not in route))
    assert covered == OFFERS[Door.HTTP]


def test_every_board_action_is_an_operation_of_the_table() -> None:
    ops = {str(op): op for op in OFFERS[Door.BOARD]}
    actions = {ops.get(str(operation), operation) for operation in board.ACTIONS.values()}
    assert actions | {Op.READ, Op.LIST} == OFFERS[Door.BOARD], "board actions and table differ"


def test_every_role_operation_is_offered_at_a_token_door_or_says_why_not() -> None:
    asked = {OPERATION_OF[op] for door in TOKEN_DOORS for op in OFFERS[door]}
    for operation in Operation:
        assert operation in asked or f"Operation.{operation.name}" in NOT_OPERATIONS, (
            f"access.Operation.{operation.name}: no door of the parity table asks for it")


@pytest.mark.parametrize("door", list(Door))
def test_each_driver_offers_what_the_table_says(door: Door) -> None:
    assert door in DRIVERS, f"{door} has no driver"
    assert offered(DRIVERS[door]) == OFFERS[door]


@pytest.mark.parametrize("door", list(Door))
def test_every_operation_a_door_offers_runs_there(door: Door) -> None:
    """Each operation a door offers is asked at it by some scenario, and (but for what a
    remote caller may not make the server run) let through by one."""
    asked = {s.op for s in SCENARIOS if s.applies(door)}
    assert asked == OFFERS[door], f"{door}: no scenario asks for {OFFERS[door] - asked}"
    answered = {s.op for s in SCENARIOS if s.applies(door) and s.expected(door) in ANSWERS}
    never = {Op.COMMAND} if door in TOKEN_DOORS else set()
    assert answered | never >= OFFERS[door], f"{door}: nothing lets {OFFERS[door] - answered}"


def test_scenario_names_are_unique_and_each_runs_somewhere() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names)), "two scenarios share a name"
    for scenario in SCENARIOS:
        assert any(scenario.applies(door) for door in Door), f"{scenario.name} runs nowhere"
        assert set(scenario.xfail) <= {d for d in Door if scenario.applies(d)}, scenario.name


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_dump_sees_every_kind_of_trace(backend: str, doors: Doors) -> None:
    """The suite's one witness of "changed nothing" notices each kind of write: a run's
    events and packet, a blob, a setting, a token, and a file beside a SQLite store."""
    world = doors.get(Door.SDK, backend).world
    mark = uuid.uuid4().hex
    writes: list[Callable[[], object]] = [
        lambda: world.as_worker(world.start(worker="w1").id).heartbeat(note=mark),
        lambda: world.store.put_blob(mark.encode()),
        lambda: world.store.put_setting(f"parity.{mark[:8]}", mark),
        lambda: tokens.issue(world.store, holder=mark, role="viewer", run_id=None, ttl=None,
                             by="parity")]
    if backend == "sqlite":
        writes.append(lambda: (Path(world.url).parent / mark).write_text(mark))
    for write in writes:
        before = world.dump()
        write()
        assert world.dump() != before
