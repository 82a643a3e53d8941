"""The request edge holds everywhere it must: every route under `/api` and `/a2a` is behind
`edge.token_first` (a route added without it would take a body unchecked), and declares
the media types its body takes; the board's routes and the hook route are not behind it
(the board takes its cookie; the hook answers every request 200 itself). And the
nesting bound (`inputs.nesting`) refuses exactly the JSON deeper than its limit, whatever
the strings inside hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from litestar.handlers import HTTPRouteHandler

from waypost import inputs
from waypost.errors import TooDeep
from waypost.http import edge
from waypost.http.app import create_app
from waypost.http.settings import ServerConfig
from waypost.inputs import MAX_NESTING


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


# --- inputs.nesting: counted on the bytes, strings skipped -------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\ab,:\n')),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3)),
    max_leaves=30)


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@given(value=json_values, limit=st.integers(0, 6))
def test_nesting_refuses_exactly_what_is_deeper_than_the_limit(value: object,
                                                               limit: int) -> None:
    data = json.dumps(value, ensure_ascii=False).encode()
    if depth_of(value) > limit:
        with pytest.raises(TooDeep):
            inputs.nesting(data, limit=limit)
    else:
        inputs.nesting(data, limit=limit)


def test_nesting_at_the_documented_limit() -> None:
    inputs.nesting(b"[" * MAX_NESTING + b"]" * MAX_NESTING)
    with pytest.raises(TooDeep):
        inputs.nesting(b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1))
    with pytest.raises(TooDeep):  # deep and never closed: refused all the same
        inputs.nesting(b'{"a":' * 500_000)
