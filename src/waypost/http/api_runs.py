"""The runs: list, start (with an Idempotency-Key), show, events, verify, the bundle, the
A2A task projection, and the token holder's inbox. Each route reads the request into one call of
`waypost.http.operations`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Annotated

import anyio.to_thread
from litestar import Controller, Response, get, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import HeaderParameter, JSONBody, PathParameter, QueryParameter
from litestar.response import Stream

from waypost.http import operations as ops
from waypost.http import shapes
from waypost.http.deps import CallerDep, ConfigDep, StoreDep
from waypost.http.errors import ERRORS
from waypost.model import Packet, State
from waypost.usecases.inbox import Inbox

# the document's answers of a start: 201 (the route's own), its errors, and the 200 of a
# repeated Idempotency-Key
AGAIN = {**ERRORS, 200: ResponseSpec(shapes.Started, generate_examples=False, description=(
    "The Idempotency-Key found the run an earlier request started: that run, "
    "`created: false`."))}
RunId = Annotated[str, PathParameter(max_length=64, description="The run's id (wp_…).")]
Limit = Annotated[int, QueryParameter(ge=1, le=ops.MAX_PAGE, description="Rows per page.")]


TAR = "application/x-tar"
DSSE = "application/vnd.dsse.envelope.v1+json"
BUNDLE = (
    "A reader who may see the run's private view (its owner, its lease holder, whom the "
    f"owner named) gets the whole bundle (`{TAR}`), as `waypost export` writes it; anyone "
    "else who may read the run gets its public statement alone "
    f"(`{DSSE}`): an in-toto statement of predicate type "
    "`https://waypost.dev/checkpoint-public/v1` (the public summary, the subjects, the "
    "verdicts; no private text) in a DSSE envelope. Either is signed by the server's key "
    "(`waypost serve --key-file`); a server without one refuses (403). Check a bundle "
    "with `waypost verify-bundle`.")
CHUNK = 1024 * 1024


def _chunks(path: str, folder: str) -> Iterator[bytes]:
    """The bundle's bytes a chunk at a time; the folder it was written in goes after."""
    try:
        with open(path, "rb") as file:
            while chunk := file.read(CHUNK):
                yield chunk
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class RunsController(Controller):
    path = "/api/runs"
    tags = ("runs",)

    @get("/", sync_to_thread=True, responses=ERRORS, summary="List runs, newest first")
    def list_runs(
        self, store: StoreDep, caller: CallerDep, config: ConfigDep,
        states: Annotated[list[State] | None, QueryParameter(
            name="state", max_items=10, description="Only runs in these states.")] = None,
        owner: Annotated[str | None, QueryParameter(max_length=200)] = None,
        cursor: Annotated[str | None, QueryParameter(
            max_length=64, description="`next_cursor` of the page before.")] = None,
        limit: Limit = 100,
    ) -> shapes.RunPage:
        return ops.list_runs(store, caller, states=states or (), owner=owner, cursor=cursor,
                             limit=limit, project=config.project)

    @post("/", sync_to_thread=True, responses=AGAIN, status_code=201,
          summary="Start a run (201; 200 when the Idempotency-Key found an earlier one)")
    def start(
        self, store: StoreDep, caller: CallerDep, config: ConfigDep,
        data: JSONBody[shapes.StartBody],
        idempotency_key: Annotated[str | None, HeaderParameter(
            name="Idempotency-Key", max_length=200, description=(
                "The same key with the same body returns the same run; with another body, "
                "409."))] = None,
    ) -> Response[shapes.Started]:
        started = ops.start(store, caller, config, data, idempotency_key)
        return Response(started, status_code=201 if started.created else 200)

    @get("/{run_id:str}", responses=ERRORS, summary=(
        "The packet, with its observed view; with `wait`, once the run needs the parent"))
    async def show(self, store: StoreDep, caller: CallerDep, config: ConfigDep,
                   run_id: RunId,
                   wait: Annotated[str | None, QueryParameter(max_length=32, description=(
                       "A long poll: answer once the run needs the parent (ready_for_review, "
                       "blocked on an owner's blocker, delivered, cancelled) or after this "
                       "long (90s, 1m; at most 60s), whichever is first. The answer's "
                       "`Waypost-Wait` header says which: reached, timed_out or ended.")
                   )] = None) -> Response[Packet]:
        # async: a long poll holds no thread while it waits (`usecases.waiting`)
        if wait is None:
            packet = await anyio.to_thread.run_sync(
                lambda: ops.show(store, caller, run_id, project=config.project))
            return Response(packet)
        packet, outcome = await ops.show_when_needed(store, caller, run_id, wait,
                                                     project=config.project)
        return Response(packet, headers={"Waypost-Wait": outcome})

    @get("/{run_id:str}/events", sync_to_thread=True, responses=ERRORS,
         summary="The run's events, in order")
    def events(
        self, store: StoreDep, caller: CallerDep, config: ConfigDep, run_id: RunId,
        after: Annotated[int, QueryParameter(ge=0, le=2**62, description=(
            "Events after this seq (`next_cursor` of the page before).")) ] = 0,
        limit: Limit = 100,
    ) -> shapes.EventPage:
        return ops.events(store, caller, run_id, after=after, limit=limit,
                          project=config.project)

    @get("/{run_id:str}/bundle", responses=ERRORS, media_type=TAR, summary=(
        "The run's signed bundle to a reader of its private view; its signed public "
        "statement alone to anyone else"), description=BUNDLE)
    async def bundle(self, store: StoreDep, caller: CallerDep, config: ConfigDep,
                     run_id: RunId) -> Stream:
        folder = tempfile.mkdtemp(prefix="waypost-bundle-")
        try:
            served = await anyio.to_thread.run_sync(
                lambda: ops.bundle(store, caller, config, run_id, folder))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if served.file is None:
            shutil.rmtree(folder, ignore_errors=True)
            assert served.envelope is not None
            return Stream(iter((served.envelope,)), media_type=DSSE,
                          headers={"Content-Type": DSSE})
        return Stream(_chunks(served.file, folder), media_type=TAR, headers={
            "Content-Disposition": f'attachment; filename="{served.run}.tar"'})

    @get("/{run_id:str}/verify", sync_to_thread=True, responses=ERRORS,
         summary="Recompute the hash chain and the fold")
    def verify(self, store: StoreDep, caller: CallerDep, run_id: RunId) -> shapes.Verified:
        return ops.verify(store, caller, run_id)


@get("/a2a/tasks/{run_id:str}", sync_to_thread=True, responses=ERRORS, tags=["a2a"],
     summary="The run as an A2A Task")
def a2a_task(store: StoreDep, caller: CallerDep, config: ConfigDep,
             run_id: RunId) -> shapes.A2ATask:
    return ops.a2a_task(store, caller, run_id, project=config.project)


class InboxController(Controller):
    path = "/api/inbox"
    tags = ("inbox",)

    @get("/", sync_to_thread=True, responses=ERRORS,
         summary="The token holder's inbox: news of the runs it owns, not yet acknowledged")
    def inbox(self, store: StoreDep, caller: CallerDep, config: ConfigDep) -> Inbox:
        return ops.inbox(store, caller, ack=False, project=config.project)

    @post("/ack", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Acknowledge the token holder's inbox: answers the items acknowledged")
    def ack(self, store: StoreDep, caller: CallerDep, config: ConfigDep) -> Inbox:
        return ops.inbox(store, caller, ack=True, project=config.project)
