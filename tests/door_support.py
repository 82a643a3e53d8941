"""The same request through each door, answered in one shape: the CLI in-process
(`waypost.cli.main`), the library, `waypost mcp` over stdio driven by the official client
(held open across calls by a blocking portal), and a real HTTP API server. Each door has a
store of its own, so a test can compare what each recorded and see that a refusal left its
store exactly as it was."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.types import CallToolResult, TextContent

import waypost
from tests.helpers import StoreDump, dump_store
from tests.http_support import Api, issue, serving
from tests.integration.test_mcp import server as mcp_server
from waypost.cli import main
from waypost.errors import WaypostError
from waypost.model import to_json

ACTOR = "alice"  # who acts at every door: the owner, and the worker the start names
# a start parameter's CLI flag, where it is not the parameter's name with dashes
FLAGS = {"gates": "--gate", "session": "--session"}


@dataclass(frozen=True)
class Answer:
    """What a door said: a document, or a refusal's code (None where the door does not
    name it: an MCP tool error is text) and message."""

    document: dict[str, Any] | None = None
    code: str | None = None
    message: str = ""
    status: int = 0  # the exit code or the HTTP status; 0 for the library and MCP

    @property
    def ok(self) -> bool:
        return self.document is not None


@dataclass
class Door:
    name: str
    store: Path

    def dump(self) -> StoreDump:
        return dump_store(self.store) if self.store.exists() else {}


# --- the CLI, in-process -------------------------------------------------------------------


class CliDoor(Door):
    def __call__(self, *args: str) -> Answer:
        out, err = io.StringIO(), io.StringIO()
        common = ["--json", "--store", str(self.store), "--as", ACTOR]
        at = args.index("--") if "--" in args else len(args)  # before a command's own words
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*args[:at], *common, *args[at:]])
        if code == 0:
            return Answer(document=msgspec.json.decode(out.getvalue()))
        try:
            error = msgspec.json.decode(err.getvalue())["error"]
        except (msgspec.DecodeError, KeyError, TypeError):
            return Answer(code="unparsed", message=err.getvalue(), status=code)
        return Answer(code=error["code"], message=error["message"], status=code)

    def start(self, params: Mapping[str, Any], key: str | None = None) -> Answer:
        args = ["start", params["title"]]
        for name, value in params.items():
            flag = FLAGS.get(name, "--" + name.replace("_", "-"))
            for one in value if isinstance(value, list) else [] if name == "title" else [value]:
                args.append(f"{flag}={one}")  # so a value may begin with a dash
        return self(*args, *(["--idempotency-key", key] if key else []))


# --- the library ---------------------------------------------------------------------------


class SdkDoor(Door):
    def __init__(self, name: str, store: Path) -> None:
        super().__init__(name, store)
        self.opened = waypost.open_store(str(store), create=True)

    def start(self, params: Mapping[str, Any], key: str | None = None) -> Answer:
        rest = {k: v for k, v in params.items() if k != "title"}
        try:
            run, created = waypost.start(self.opened, params["title"], actor=ACTOR,
                                         idempotency_key=key, **rest)
        except WaypostError as exc:
            return Answer(code=exc.code, message=exc.message)
        return Answer(document={"run": run.id, "created": created,
                                "packet": msgspec.json.decode(to_json(run.packet))})

    def close(self) -> None:
        self.opened.close()


# --- MCP over stdio ------------------------------------------------------------------------


class McpDoor(Door):
    def __init__(self, name: str, store: Path, portal: BlockingPortal,
                 session: ClientSession) -> None:
        super().__init__(name, store)
        self.portal = portal
        self.session = session

    def call(self, tool: str, **arguments: Any) -> Answer:
        result = self.portal.call(self.session.call_tool, tool, arguments)
        assert isinstance(result, CallToolResult)
        text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
        if not result.is_error:
            assert result.structured_content is not None
            return Answer(document=dict(result.structured_content))
        lines = text.split("\n")
        while len(lines) > 1 and lines[-1].startswith("next"):
            lines.pop()  # the hint and the next tool: each door words those its own way
        return Answer(message="\n".join(lines))

    def start(self, params: Mapping[str, Any], key: str | None = None) -> Answer:
        arguments = {k: v for k, v in params.items() if k != "worker"}  # always the caller
        return self.call("checkpoint_start", **arguments,
                         **({"idempotency_key": key} if key else {}))


# --- the HTTP API --------------------------------------------------------------------------


class HttpDoor(Door):
    def __init__(self, name: str, store: Path, api: Api) -> None:
        super().__init__(name, store)
        self.api = api

    def post(self, path: str, body: Any, **headers: str) -> Answer:
        """POST `body` as JSON, NaN and infinities written as Python writes them (a
        client may send them, though JSON has none)."""
        response = self.api.post(path, content=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **headers})
        return self._answer(response.status_code, response.json())

    def get(self, path: str, **params: Any) -> Answer:
        response = self.api.get(path, **params)
        return self._answer(response.status_code, response.json())

    @staticmethod
    def _answer(status: int, document: Any) -> Answer:
        if status in (200, 201):
            return Answer(document=document, status=status)
        return Answer(code=document["error"]["code"], message=document["error"]["message"],
                      status=status)

    def start(self, params: Mapping[str, Any], key: str | None = None) -> Answer:
        return self.post("/api/runs", dict(params),
                         **({"Idempotency-Key": key} if key else {}))


@dataclass
class Doors:
    cli: CliDoor
    sdk: SdkDoor
    mcp: McpDoor
    http: HttpDoor

    def all(self) -> tuple[CliDoor, SdkDoor, McpDoor, HttpDoor]:
        return self.cli, self.sdk, self.mcp, self.http


@contextlib.contextmanager
def every_door(folder: Path) -> Iterator[Doors]:
    """The four doors, each on a store of its own in `folder` (the working directory while
    they are open, so no project's waypost.toml is read)."""
    for name in ("cli", "sdk", "mcp", "http"):
        (folder / name).mkdir()
        waypost.open_store(str(folder / name / "w.db"), create=True).close()
    http_store = folder / "http" / "w.db"
    with contextlib.chdir(folder), serving(str(http_store)) as url, \
            start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(mcp_server(folder / "mcp" / "w.db",
                                                         ACTOR)) as session:
        sdk = SdkDoor("sdk", folder / "sdk" / "w.db")
        try:
            yield Doors(cli=CliDoor("cli", folder / "cli" / "w.db"), sdk=sdk,
                        mcp=McpDoor("mcp", folder / "mcp" / "w.db", portal, session),
                        http=HttpDoor("http", http_store,
                                      Api(url, issue(str(http_store), ACTOR, "owner"))))
        finally:
            sdk.close()
