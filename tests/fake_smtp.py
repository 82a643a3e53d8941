"""A real SMTP server (`aiosmtpd`) on 127.0.0.1 that records what it accepted, logs in one
user, refuses the addresses it is told to, and fails on command: "451" (try later, nothing
kept), "drop" (the connection closed at DATA, nothing kept), "accept_timeout" (kept, then
no answer until the client gives up)."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fake_services import HANG

FAULTS = ("451", "drop", "accept_timeout")


class Handler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_RCPT(self, smtp: SMTP, session: Session, envelope: Envelope,
                          address: str, options: list[str]) -> str:
        if address in self.server.refuse:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, smtp: SMTP, session: Session, envelope: Envelope) -> str:
        fault = self.server.fault()
        if fault == "451":
            return "451 4.3.0 try again later"
        if fault == "drop":
            if smtp.transport is not None:
                smtp.transport.close()
            return "421 closing"
        content = envelope.content if isinstance(envelope.content, bytes) else b""
        with self.server.lock:
            self.server.received.append(message_from_bytes(content))
        if fault == "accept_timeout":
            await asyncio.sleep(HANG)
        return "250 2.0.0 accepted"


class SmtpServer:
    def __init__(self, *, user: str = "relay", password: str = "s3cret", rate: float = 0.0,
                 seed: int = 0) -> None:
        self.user, self.password = user, password
        self.refuse: set[str] = set()
        self.script: list[str] = []
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.received: list[Message] = []
        self.faulted: list[str] = []
        self.port = _free_port()
        self.controller = Controller(Handler(self), hostname="127.0.0.1", port=self.port,
                                     authenticator=self._login, auth_require_tls=False)

    @property
    def url(self) -> str:
        return f"smtp://{self.user}:{self.password}@127.0.0.1:{self.port}"

    def fault(self) -> str | None:
        with self.lock:
            kind = self.script.pop(0) if self.script else (
                self.rng.choice(FAULTS) if self.rng.random() < self.rate else "")
            if kind:
                self.faulted.append(kind)
            return kind or None

    def _login(self, server: SMTP, session: Session, envelope: Envelope, mechanism: str,
               data: Any) -> AuthResult:
        good = isinstance(data, LoginPassword) and \
            (data.login, data.password) == (self.user.encode(), self.password.encode())
        return AuthResult(success=good, handled=False)

    def message_ids(self) -> list[str]:
        with self.lock:
            return [str(m["Message-ID"]) for m in self.received]

    @contextmanager
    def running(self) -> Iterator[SmtpServer]:
        self.controller.start()
        try:
            yield self
        finally:
            self.controller.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
