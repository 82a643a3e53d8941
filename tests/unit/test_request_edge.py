"""The request edge holds everywhere it must: every route under `/api` and `/a2a` is behind
`edge.token_first` (a route added without it would take a body unchecked), and declares
the media types its body takes; the board's routes and the hook route are not behind it
(the board takes its cookie; the hook answers every request 200 itself)."""

from __future__ import annotations

from litestar.handlers import HTTPRouteHandler

from waypost.http import edge
from waypost.http.app import create_app
from waypost.http.settings import ServerConfig


def _handlers() -> list[tuple[str, HTTPRouteHandler]]:
    app = create_app(ServerConfig(store_url="unused"))
    found = []
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            if isinstance(handler, HTTPRouteHandler):
                found.append((route.path, handler))
    return found


def test_every_token_route_is_behind_the_edge() -> None:
    tokened = [(path, h) for path, h in _handlers() if path.startswith(("/api", "/a2a"))]
    assert len(tokened) >= 20
    for path, handler in tokened:
        assert edge.token_first in handler.resolve_guards(), path
        assert handler.opt.get(edge.TAKES), f"{path} declares no media type"


def test_uploads_take_bytes_and_everything_else_json() -> None:
    for path, handler in _handlers():
        if not path.startswith("/api") or "POST" not in handler.http_methods:
            continue
        expected = edge.BYTES if "/artifacts/" in path else edge.JSON
        assert handler.opt[edge.TAKES] == expected, path


def test_the_board_and_the_hook_are_not_behind_it() -> None:
    for path, handler in _handlers():
        if not path.startswith(("/api", "/a2a")):
            assert edge.token_first not in handler.resolve_guards(), path
