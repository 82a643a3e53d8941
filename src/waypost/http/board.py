"""The web board (a stub until the board lands): its handlers, composed by `create_app`."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from waypost.http.settings import ServerConfig


def handlers(config: ServerConfig) -> list[ControllerRouterHandler]:
    return []
