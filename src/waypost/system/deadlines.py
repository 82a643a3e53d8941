"""How long `waypost serve` waits for a client, and how many it holds at once.

uvicorn's HTTP/1.1 protocol (h11) with a deadline on reading each request's head and its
body, and a limit on open connections; the keep-alive bound is uvicorn's own. uvicorn has
no read deadline, and its concurrency limit acts only once a request's head is complete,
so a client dribbling one byte at a time would otherwise hold a connection as long as it
liked, and enough of them would hold the server.

The deadlines are on reading the request, never on the answer: a response that streams
(the board's `/events`) runs as long as it runs. Every open connection counts against the
limit, streams and idle keep-alive connections included; one past it is answered 503 and
closed at once, before anything of it is read.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Final

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

# A body may take longer than the body deadline while it keeps arriving at this rate or
# faster (a large artifact on a slow link); a body dribbling slower is cut at the deadline.
BODY_RATE: Final = 64 * 1024  # bytes per second
# Seconds a connection past the limit stays half-open after its 503, so that the request
# it sent meanwhile does not make the close a reset that loses the answer.
REFUSED_LINGER: Final = 1.0


def _answer(status: bytes, text: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 " + status, b"content-type: text/plain; charset=utf-8",
            b"connection: close", b"content-length: " + str(len(text)).encode(), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + text


FULL: Final = _answer(b"503 Service Unavailable",
                      b"too many open connections: try again shortly\n", b"retry-after: 1")
LATE: Final = _answer(b"408 Request Timeout",
                      b"the request did not arrive in time: connection closed\n")


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What `waypost serve` holds its clients to (seconds, connections)."""

    # The whole request head, from the connection's start (or a later request's first byte).
    header_timeout: float = 10.0
    # The whole body, from the end of its head (longer only at BODY_RATE or faster).
    body_timeout: float = 30.0
    # Open connections at once, streams and idle keep-alive connections included.
    max_connections: int = 1000
    # How long an idle connection is kept open for its next request.
    keep_alive: float = 5.0


def protocol(limits: Limits) -> type[H11Protocol]:
    """uvicorn's h11 protocol held to `limits` (uvicorn.Config's `http`)."""

    class Held(BoundedH11Protocol):
        LIMITS = limits

    return Held


class BoundedH11Protocol(H11Protocol):
    """One connection: a deadline for the request's head, then one for its body; none
    while the answer is written, nor while the connection waits idle (the keep-alive
    bound is uvicorn's)."""

    LIMITS: ClassVar[Limits] = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading = ""  # what the deadline is for: "head", "body", or "" (none due)
        self._body_from = 0.0
        self._body_bytes = 0
        self._refused = False
        self.timeout_keep_alive = self.LIMITS.keep_alive  # type: ignore[assignment]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        full = len(self.connections) >= self.LIMITS.max_connections
        super().connection_made(transport)
        if full:  # answered, then closed once the client has had a moment to read it
            self._refused = True
            transport.write(FULL)
            transport.write_eof()
            self._deadline = self.loop.call_later(REFUSED_LINGER, transport.close)
            return
        self._expect("head", self.LIMITS.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if not self._reading and self.conn.their_state is h11.IDLE:
            self._expect("head", self.LIMITS.header_timeout)  # a next request begins
        elif self._reading == "body":
            self._body_bytes += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        their = self.conn.their_state
        if self.transport.get_protocol() is not self:  # upgraded: no longer HTTP/1.1's
            self._expect("", None)
        elif their is h11.SEND_BODY:
            if self._reading != "body":
                self._body_from, self._body_bytes = self.loop.time(), 0
                self._expect("body", self.LIMITS.body_timeout)
        elif their is h11.IDLE and self._reading != "head" and self.conn.trailing_data[0]:
            self._expect("head", self.LIMITS.header_timeout)  # a pipelined request
        elif their is not h11.IDLE:
            self._expect("", None)  # read whole: the answer takes the time it takes

    def connection_lost(self, exc: Exception | None) -> None:
        self._expect("", None)
        super().connection_lost(exc)

    def _expect(self, reading: str, seconds: float | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._reading = reading
        self._deadline = None if seconds is None else self.loop.call_later(seconds, self._late)

    def _late(self) -> None:
        self._deadline = None
        if self._reading == "body":
            # a large body still arriving at BODY_RATE, or one this server stopped
            # reading for a while (its buffer was full), has more time
            due = self._body_from + self._body_bytes / BODY_RATE
            if self.flow.read_paused:
                due = self.loop.time() + self.LIMITS.body_timeout
            if due > self.loop.time():
                self._deadline = self.loop.call_at(due, self._late)
                return
        late_head, self._reading = self._reading == "head", ""
        if self.transport.is_closing():
            return
        if late_head or (self.cycle is not None and not self.cycle.response_started):
            self.transport.write(LATE)
        if self.cycle is not None:
            self.cycle.disconnected = True  # the handler's answer, if any, goes nowhere
        self.transport.close()
