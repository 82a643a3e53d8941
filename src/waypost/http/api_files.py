"""Artifacts over HTTP: an upload is the body's bytes handed as they stream to the one verb
that records bytes (`Run.add_artifact_bytes`: name, role, the run's rules, the lease and a
declared Content-Length decided before the first byte is read; then counted, 413 past the
limit before the rest is read); a download is the stored blob, checked against its sha256,
always as an attachment (never rendered by the browser on the board's origin)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from anyio import from_thread, to_thread
from litestar import Controller, Request, Response, get, post
from litestar.openapi.spec import OpenAPIMediaType, Operation, RequestBody, Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType
from litestar.params import PathParameter, QueryParameter

from waypost.errors import TooLarge
from waypost.http import edge, shapes
from waypost.http import operations as ops
from waypost.http.deps import CallerDep, ConfigDep, StoreDep
from waypost.http.errors import ERRORS
from waypost.model import ArtifactRole

RunId = Annotated[str, PathParameter(max_length=64, description="The run's id (wp_…).")]
ArtifactName = Annotated[str, PathParameter(max_length=255, description="The artifact's name.")]


@dataclass
class UploadOperation(Operation):
    """The upload's operation, saying what its body is (the handler streams it itself)."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(required=True, description="The artifact's bytes.",
                                        content={"application/octet-stream": OpenAPIMediaType(
                                            schema=Schema(type=OpenAPIType.STRING,
                                                          format=OpenAPIFormat.BINARY))})


class ArtifactsController(Controller):
    path = "/api/runs/{run_id:str}/artifacts"
    tags = ("artifacts",)

    @post("/{name:str}", responses=ERRORS, status_code=200, request_max_body_size=None,
          operation_class=UploadOperation, opt=edge.takes(*edge.BYTES),
          summary="Record an artifact: the request body is its bytes (streamed)")
    async def upload(
        self, request: Request[Any, Any, Any], store: StoreDep, caller: CallerDep,
        config: ConfigDep, run_id: RunId, name: ArtifactName,
        role: Annotated[ArtifactRole, QueryParameter(description="The artifact's role.")] = (
            ArtifactRole.OTHER),
        epoch: Annotated[int | None, QueryParameter(ge=1, le=2**62, description=(
            "The worker's lease epoch (from claim)."))] = None,
    ) -> shapes.Artifacted:
        declared = request.headers.get("content-length")
        size = int(declared) if declared is not None and declared.isdigit() else None
        return await to_thread.run_sync(lambda: ops.add_artifact(
            store, caller, run_id, name=name, role=role, epoch=epoch, chunks=pulled(request),
            size=size, max_bytes=config.project.max_artifact_bytes))

    @get("/{name:str}", sync_to_thread=True, responses=ERRORS,
         media_type="application/octet-stream", summary="Download a stored artifact")
    def download(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                 name: ArtifactName) -> Response[bytes]:
        artifact, data = ops.artifact(store, caller, run_id, name)
        return Response(data, media_type="application/octet-stream", headers={
            "Content-Disposition": f'attachment; filename="{artifact.name}"',
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox",
            "X-Waypost-Sha256": artifact.sha256 or ""})


def pulled(request: Request[Any, Any, Any]) -> Iterator[bytes]:
    """The body's chunks, pulled one at a time from the event loop by the worker thread the
    use case runs in (so a refused upload is never read past the chunk that decided it)."""
    stream = request.stream()
    while True:
        try:
            yield from_thread.run(stream.__anext__)
        except StopAsyncIteration:
            return


async def read_at_most(request: Request[Any, Any, Any], limit: int) -> bytes:
    """A whole (small) body, such as a hook's JSON, refused (TooLarge: 413) as soon as it
    is past `limit` bytes. An artifact's bytes are not read here: they stream to the use
    case (`pulled`)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(size: int, limit: int) -> TooLarge:
    return TooLarge(f"the request body is over this route's limit of {limit} bytes ({size} "
                    "sent so far); nothing was done", hint="send a smaller body")
