"""What a refusal names as its next step must exist at the door that refused: at MCP a
tool of the server (`surfaces.MCP_TOOLS`, which test_completeness holds equal to the
server's tool list), at the HTTP API a route of its OpenAPI document. The drivers check
every refusal of every scenario with these."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .surfaces import MCP_TOOLS

# what a step may name that no caller drives (the relay's): no tool, no route
NO_DOOR = frozenset({"deliver"})


def _steps(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    first = document.get("next")
    return [first, *document.get("also", [])] if first else []


def check_mcp(document: Mapping[str, Any], text: str) -> None:
    """A tool error's next steps, and the tool its text names next, are tools of the
    server."""
    for each in _steps(document):
        if each["verb"] in NO_DOOR:
            assert each["tool"] is None, each
        else:
            assert each["tool"] in MCP_TOOLS, f"a next step names the tool {each['tool']!r}"
    if "next tool: " in text:
        named = text.rsplit("next tool: ", 1)[1].split(maxsplit=1)[0]
        assert named in MCP_TOOLS, f"the refusal names the tool {named!r}: {text}"


@functools.cache
def routes() -> frozenset[tuple[str, str]]:
    from waypost.http.app import create_app
    from waypost.http.settings import ServerConfig

    document = create_app(ServerConfig(store_url="unused")).openapi_schema
    return frozenset((method.upper(), path) for path, item in (document.paths or {}).items()
                     for method in ("get", "post", "put", "patch", "delete")
                     if getattr(item, method, None) is not None)


def template(method: str, path: str) -> tuple[str, str]:
    """The route a concrete request goes to, as the OpenAPI document names it."""
    parts = path.split("?", maxsplit=1)[0].split("/")
    if parts[1:3] == ["api", "runs"] and len(parts) > 3:
        parts[3] = "{run_id}"
        if len(parts) > 5 and parts[4] == "artifacts":
            parts[5] = "{name}"
    return method, "/".join(parts)


def check_http(error: Mapping[str, Any]) -> None:
    """An API error's next steps are routes of the OpenAPI document."""
    for each in _steps(error):
        if each["verb"] in NO_DOOR:
            assert each["method"] is None, each
            continue
        assert each["method"] is not None, f"a {each['verb']} step names no route"
        found = template(each["method"], each["path"])
        assert found in routes(), f"a next step names {found}: no such route"
