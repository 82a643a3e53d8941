"""The HTTP connections a relay keeps alive between sends: its webhook, Slack and GitHub
targets share one kept client (`waypost.system.web.kept_client`), so a run of deliveries
to one host pays for one connection (and TLS handshake) per concurrent send, not one per
send. Made on the first HTTP send (a relay with only file: targets never loads httpx),
closed when the relay stops. A target given no `Connections` makes a client of its own for
each send, as before."""

from __future__ import annotations

import functools
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

CONNECT_TIMEOUT = 10.0  # seconds for one connection to open, at most


class Connections:
    """At most `most` kept connections, over every host; shared by the relay's threads.
    Each request's parts (connect, read, write) time out after `timeout`, as one send's."""

    def __init__(self, *, most: int, timeout: float) -> None:
        self.most = most
        self.timeout = timeout
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Connections(most={self.most}, open={self._client is not None})"

    def client(self) -> httpx.Client:
        """The kept client (made now if this is the first send); its requests must be
        made in a `waypost.system.web.within` block."""
        with self._lock:
            if self._client is None:
                from waypost.system.web import kept_client

                self._client = kept_client(most=self.most, verify=tls_context(),
                                           timeout=self.timeout,
                                           connect=min(self.timeout, CONNECT_TIMEOUT))
            return self._client

    def close(self) -> None:
        """Close every kept connection; a later send opens new ones."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


@contextmanager
def client_for(url: str, timeout: float, connections: Connections | None
               ) -> Iterator[httpx.Client]:
    """The client for one send to `url`, every request of which ends within `timeout` of
    now: the kept one, or (without `connections`) one of its own, closed after the send."""
    from waypost.system import web

    if connections is None:
        with web.deadline_client(url, timeout, verify=tls_context(),
                                 connect=min(timeout, CONNECT_TIMEOUT)) as client:
            yield client
        return
    with web.within(timeout):
        yield connections.client()


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context per process: loading the CA bundle costs ~70 ms, a send should not."""
    import httpx

    return httpx.create_ssl_context()
