"""HTTP under one overall deadline (the `http:` check, the webhook target). httpx's
timeouts bound each read, so a server sending a byte every few seconds could hold a request
for ever; here every connect, TLS handshake, read and write gets only what is left of one
deadline, so the whole request, body included, ends by it. Imported only when a request is
really made (it brings httpx)."""

from __future__ import annotations

import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx


def deadline_client(url: str, timeout: float, *, verify: ssl.SSLContext | None = None,
                    follow_redirects: bool = False, connect: float | None = None) -> httpx.Client:
    """A client for requests to `url` that end within `timeout` seconds of its creation,
    through the proxy the environment names for `url`, if any (HTTP_PROXY, HTTPS_PROXY,
    ALL_PROXY, NO_PROXY)."""
    context = verify if verify is not None else httpx.create_ssl_context()
    transport = _Transport(time.monotonic() + timeout, context, proxy_for(url))
    return httpx.Client(transport=transport, follow_redirects=follow_redirects,
                        timeout=httpx.Timeout(timeout, connect=connect or timeout),
                        trust_env=False)


def proxy_for(url: str) -> str | None:
    """The HTTP(S) proxy the environment names for `url` (None: connect directly)."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = proxy if "://" in proxy else f"http://{proxy}"
    return proxy if proxy.startswith(("http://", "https://")) else None


def _left(timeout: float | None, deadline: float, late: type[Exception]) -> float:
    """What is left of the deadline (at most `timeout`); past it, `late` is raised."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the request's overall deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, self._deadline, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, self._deadline, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        left = _left(timeout, self._deadline, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, deadline: float) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        left = _left(timeout, self._deadline, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, left, local_address, socket_options)
        return _Stream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Transport(httpx.HTTPTransport):
    """httpx's own transport over a pool whose connections carry the deadline."""

    def __init__(self, deadline: float, context: ssl.SSLContext, proxy: str | None) -> None:
        super().__init__(verify=context, trust_env=False)
        backend = _Backend(deadline)
        if proxy is None:
            self._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=backend)
            return
        via = httpx.Proxy(proxy)
        self._pool = httpcore.HTTPProxy(
            proxy_url=httpcore.URL(scheme=via.url.raw_scheme, host=via.url.raw_host,
                                   port=via.url.port, target=via.url.raw_path),
            proxy_auth=via.raw_auth, proxy_headers=via.headers.raw, ssl_context=context,
            network_backend=backend)
