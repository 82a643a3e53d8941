"""For the delivery tests: approved runs, a scripted fake target, and a real webhook receiver
on 127.0.0.1 that checks every request with the official `standardwebhooks` library."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import standardwebhooks

from tests.helpers import FakeClock
from waypost.config import Config
from waypost.delivery.settings import DeliverySettings
from waypost.model import Blocker, BlockerKind, EvidenceKind, Kind, State, Verdict
from waypost.store import Store
from waypost.usecases import runs, starting

PRIVATE = "customer ACME-7731 fixed on host build-17.corp.internal; told bob@acme-corp.example"
PUBLIC = "Login race fixed; the flaky test now passes 200 runs in a row"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def approved_run(store: Store, clock: Callable[[], datetime], *, target: str = "none:",
                 notify: str | None = None, title: str = "Fix the flaky login test") -> str:
    """A run taken through claim, evidence, ready and review to `approved`."""
    run, _ = starting.start(store, title, actor="alice", owner="alice", target=target,
                        notify=notify, kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    owner = runs.Run(store, run.id, actor="alice", clock=clock)
    owner.review(config=Config())
    owner.approve()
    return run.id


def delivery_failed(store: Store, run_id: str) -> Blocker:
    """The run is blocked by its one open blocker, delivery_failed: that blocker."""
    packet = store.get(run_id)
    assert packet.state is State.BLOCKED
    [blocker] = packet.open_blockers
    assert blocker.kind is BlockerKind.DELIVERY_FAILED
    return blocker


def fast(**overrides: Any) -> DeliverySettings:
    """Settings for tests: short waits, a secret."""
    values: dict[str, Any] = {"backoff_base": 0.2, "max_delay": 5.0, "horizon": 60.0,
                              "timeout": 10.0}
    values.update(overrides)
    return DeliverySettings(**values)


class Request(msgspec.Struct, frozen=True, kw_only=True):
    headers: dict[str, str]
    body: bytes
    port: int = 0  # the sender's: requests on one kept-alive connection share it

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]


Responder = Callable[[Request], tuple[int, bytes]]


class QuietServer(ThreadingHTTPServer):
    """The test receivers' server: a thread per connection, none waited for at the end."""

    daemon_threads = True
    # a relay opens up to 8 connections at once, two relays 16: socketserver's backlog of
    # 5 overflows, and the kernel resets a connection now and then (a reset is a failed
    # send the relay retries later, so `deliver --once` would leave it queued)
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a relay killed mid-request, a dropped connection: expected here, not news


class WebhookServer:
    """A real HTTP receiver: verifies each request with `standardwebhooks`, records it,
    and answers what `respond` says (200 by default); with `keep_alive`, over HTTP/1.1
    connections kept open between requests (else each request has its own)."""

    def __init__(self, secret: str, respond: Responder | None = None, *,
                 keep_alive: bool = False) -> None:
        self.secret = secret
        self.keep_alive = keep_alive
        self.respond: Responder = respond or (lambda request: (200, b"ok"))
        self.requests: list[Request] = []
        self.verified: list[Any] = []
        self.rejected: list[str] = []
        self._lock = threading.Lock()
        self.httpd = QuietServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def ids(self) -> list[str]:
        with self._lock:
            return [r.id for r in self.requests]

    def _record(self, request: Request) -> tuple[int, bytes]:
        try:
            payload = standardwebhooks.Webhook(self.secret).verify(request.body,
                                                                   request.headers)
        except standardwebhooks.WebhookVerificationError as exc:
            with self._lock:
                self.rejected.append(str(exc))
            return 401, b"rejected"
        with self._lock:
            self.requests.append(request)
            self.verified.append(payload)
        return self.respond(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                request = Request(headers={k.lower(): v for k, v in self.headers.items()},
                                  body=body, port=self.client_address[1])
                status, answer = server._record(request)
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[WebhookServer]:
        with served(self.httpd):
            yield self


def drain_until_settled(relay: Any, clock: FakeClock, *, rounds: int = 50) -> None:
    """Drain, move the fake clock to the next due time, repeat until nothing is queued."""
    for _ in range(rounds):
        relay.drain()
        due = relay.store.next_delivery_due()
        if due is None:
            return
        clock.now = max(clock.now, due)
    raise AssertionError("deliveries still queued after many rounds")


@contextmanager
def served(httpd: ThreadingHTTPServer) -> Iterator[None]:
    """`httpd` serving from a thread of its own while the block runs, then shut and closed."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
