"""The ASGI application: the JSON API, the board and the host-hook endpoint, over one store
opened when the server starts and closed when it stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import Schema
from litestar.types import ControllerRouterHandler

from waypost.http import auth, board, edge, shapes
from waypost.http.answering import answering
from waypost.http.api_commands import CommandsController
from waypost.http.api_files import ArtifactsController
from waypost.http.api_hooks import claude_hook
from waypost.http.api_runs import InboxController, RunsController, a2a_task
from waypost.http.docs import PlainDocs, plain_values
from waypost.http.errors import HANDLERS
from waypost.http.github_hooks import github_webhook
from waypost.http.settings import ServerConfig
from waypost.http.slack_actions import slack_actions
from waypost.store import Store, open_store

SCHEMA_PATH = "/schema"  # the reference (HTML), /schema/openapi.json and .yaml; no CDN


def create_app(config: ServerConfig, *, store: Store | None = None) -> Litestar:
    """The app serving `config.store_url` (or `store`, which the caller then closes)."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        # the loop's own pool (shut down with the loop) runs every sync handler and dependency
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(
            max_workers=config.threads, thread_name_prefix="waypost-request"))
        if store is not None:  # the caller's, and already in the state
            with answering(app.state, store, config):
                yield
            return
        app.state.store = opened = open_store(config.store_url,
                                              group_commit=config.project.group_commit)
        try:
            with answering(app.state, opened, config):
                yield
        finally:
            opened.close()

    handlers: list[ControllerRouterHandler] = [*api_handlers(config), *board.handlers(config)]
    app = Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        dependencies={"store": Provide(store_of, sync_to_thread=False),
                      "config": Provide(lambda: config, sync_to_thread=False),
                      "caller": Provide(auth.caller, sync_to_thread=True)},
        exception_handlers=HANDLERS,  # type: ignore[arg-type]
        request_max_body_size=config.max_json_body,
        openapi_config=OpenAPIConfig(
            title="waypost", version="1", path=SCHEMA_PATH,
            render_plugins=[PlainDocs(), JsonRenderPlugin(), YamlRenderPlugin()]),
        state=State({"config": config, **({"store": store} if store is not None else {})}),
    )
    closed_bodies(app)
    plain_values(app.openapi_schema)
    return app


def closed_bodies(app: Litestar) -> None:
    """Say in the document what the bodies are: closed (msgspec refuses an unknown field,
    so a client, and schemathesis, must not send one)."""
    bodies = {cls.__name__ for cls in _subclasses(shapes.Body)}
    components = app.openapi_schema.components.schemas or {}
    for name, schema in components.items():
        if name in bodies and isinstance(schema, Schema):
            schema.additional_properties = False


def _subclasses(cls: type) -> list[type]:
    found: list[type] = [cls]
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found += _subclasses(sub)
    return found


def store_of(state: State) -> Store:
    store: Store = state.store
    return store


def api_handlers(config: ServerConfig) -> list[ControllerRouterHandler]:
    """The token routes behind their edge (`edge.token_first`: bearer token, media type,
    size and nesting, before a body is decoded), and the hook route, which answers all."""
    tokened = Router(path="/", guards=[edge.token_first], opt=edge.takes(*edge.JSON),
                     route_handlers=[RunsController, CommandsController, ArtifactsController,
                                     InboxController, a2a_task])
    return [tokened, claude_hook, slack_actions, github_webhook]
