"""Every door's driver, by door."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .doors_github import GitHubDoor
from .doors_local import CliDoor, HookCliDoor, SdkBlockDoor, SdkDoor
from .doors_mcp import McpHttpDoor, McpStdioDoor
from .doors_slack import SlackDoor
from .doors_web import BoardDoor, HookHttpDoor, HttpDoor
from .driver import Driver
from .terms import Door

DRIVERS: Final[Mapping[Door, type[Driver]]] = {
    Door.SDK: SdkDoor,
    Door.SDK_BLOCK: SdkBlockDoor,
    Door.CLI: CliDoor,
    Door.MCP_STDIO: McpStdioDoor,
    Door.MCP_HTTP: McpHttpDoor,
    Door.HTTP: HttpDoor,
    Door.BOARD: BoardDoor,
    Door.HOOK_CLI: HookCliDoor,
    Door.HOOK_HTTP: HookHttpDoor,
    Door.SLACK: SlackDoor,
    Door.GITHUB: GitHubDoor,
}
