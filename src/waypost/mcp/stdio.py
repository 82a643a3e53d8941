"""Over stdio, every line is answered: the SDK's transport reads a line at a time and
decodes it (pydantic's JSON parser, which refuses nesting deeper than 200 levels as it
reads, without recursing); a line it cannot decode reaches the session as an exception,
which the SDK's session logs and drops, and the client that sent it waits for ever.
JSON-RPC 2.0 answers such a line with an error whose id is null (the id cannot be read
from it): -32700 when the line is not JSON, -32600 when it is JSON but no JSON-RPC
message. `Answering` sits between the transport and the session and writes that answer;
the session reads the next line as if the bad one had never come."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Final, Self

from anyio import EndOfStream
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

PARSE: Final = "Parse error: the line is not JSON this server reads"
NOT_A_MESSAGE: Final = "Invalid Request: the line is JSON, but no JSON-RPC 2.0 message"


def answer_to(exc: object) -> ErrorData:
    """The error a line the transport could not decode is answered with. Pydantic's
    reason for unreadable JSON names a place in the line, never its content."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_input=False, include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            return ErrorData(code=PARSE_ERROR, message=f"{PARSE} ({errors[0]['msg']})")
        return ErrorData(code=INVALID_REQUEST, message=NOT_A_MESSAGE)
    return ErrorData(code=PARSE_ERROR, message=PARSE)


class Answering:
    """The transport's read stream, minus the lines it could not decode: each is answered
    on `write` and skipped. One line in, at most one answer out, so the loop is as bounded
    as the input."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    @property
    def last_context(self) -> object:
        """The sender's context of the message last read (the SDK's runner asks for it)."""
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._read.receive()
            if isinstance(item, SessionMessage):
                return item
            error = JSONRPCError(jsonrpc="2.0", id=None, error=answer_to(item))
            await self._write.send(SessionMessage(error))

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None:
        await self.aclose()
