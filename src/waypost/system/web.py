"""HTTP under one overall deadline (the `http:` check, the delivery targets). httpx's
timeouts bound each read, so a server sending a byte every few seconds could hold a request
for ever; here every connect, TLS handshake, read and write gets only what is left of one
deadline, so the whole request, body included, ends by it. Imported only when a request is
really made (it brings httpx).

Two kinds of client: `deadline_client`, for the requests of one moment, whose deadline is
fixed when it is made; and `kept_client`, which keeps its connections alive between
requests (the relay's sends to one host reuse them), whose requests each end by the
deadline of the `within` block they are made in.
"""

from __future__ import annotations

import http.cookiejar
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

Deadline = Callable[[], float]  # the monotonic time by which a request must have ended

KEEP_IDLE = 30.0  # seconds a kept connection may stay idle before it is closed
_REQUEST_ENDS: ContextVar[float | None] = ContextVar("waypost_request_ends", default=None)


def deadline_client(url: str, timeout: float, *, verify: ssl.SSLContext | None = None,
                    follow_redirects: bool = False, connect: float | None = None) -> httpx.Client:
    """A client for requests to `url` that end within `timeout` seconds of its creation,
    through the proxy the environment names for `url`, if any (HTTP_PROXY, HTTPS_PROXY,
    ALL_PROXY, NO_PROXY)."""
    context = verify if verify is not None else httpx.create_ssl_context()
    ends = time.monotonic() + timeout
    transport = _Transport(lambda: ends, context, proxy_for(url))
    return httpx.Client(transport=transport, follow_redirects=follow_redirects,
                        timeout=httpx.Timeout(timeout, connect=connect or timeout),
                        trust_env=False)


def kept_client(*, most: int, verify: ssl.SSLContext, timeout: float,
                connect: float | None = None) -> httpx.Client:
    """A client whose connections stay open between requests (at most `most` of them, over
    every host; an idle one closes after `KEEP_IDLE`), safe to share between threads. Each
    request goes through the proxy the environment names for its URL, and must be made in a
    `within` block, which ends it. It keeps no cookies: the targets sharing it share nothing
    else."""
    limits = httpx.Limits(max_connections=most, max_keepalive_connections=most,
                          keepalive_expiry=KEEP_IDLE)
    no_cookies = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    return httpx.Client(transport=_ByProxy(verify, limits), cookies=no_cookies,
                        timeout=httpx.Timeout(timeout, connect=connect or timeout),
                        trust_env=False)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Every request a kept client makes in this block (in this thread) ends within
    `seconds` of the block's start, all of them together."""
    token = _REQUEST_ENDS.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _REQUEST_ENDS.reset(token)


def _request_ends() -> float:
    ends = _REQUEST_ENDS.get()
    if ends is None:
        raise RuntimeError("a kept client's request must be made in a `within` block")
    return ends


def proxy_for(url: str, proxies: dict[str, str] | None = None) -> str | None:
    """The HTTP(S) proxy the environment names for `url` (None: connect directly), from
    `proxies` when given (what `urllib.request.getproxies` read earlier)."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies() if proxies is None else proxies
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = proxy if "://" in proxy else f"http://{proxy}"
    return proxy if proxy.startswith(("http://", "https://")) else None


def _left(timeout: float | None, deadline: Deadline, late: type[Exception]) -> float:
    """What is left of the deadline (at most `timeout`); past it, `late` is raised."""
    left = deadline() - time.monotonic()
    if left <= 0:
        raise late("the request's overall deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
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
    def __init__(self, deadline: Deadline) -> None:
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

    def __init__(self, deadline: Deadline, context: ssl.SSLContext, proxy: str | None,
                 limits: httpx.Limits | None = None) -> None:
        super().__init__(verify=context, trust_env=False)
        backend = _Backend(deadline)
        pooled: dict[str, Any] = {} if limits is None else {
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry}
        if proxy is None:
            self._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=backend,
                                                 **pooled)
            return
        via = httpx.Proxy(proxy)
        self._pool = httpcore.HTTPProxy(
            proxy_url=httpcore.URL(scheme=via.url.raw_scheme, host=via.url.raw_host,
                                   port=via.url.port, target=via.url.raw_path),
            proxy_auth=via.raw_auth, proxy_headers=via.headers.raw, ssl_context=context,
            network_backend=backend, **pooled)


ORIGINS_KEPT = 1024  # origins whose proxy a kept client remembers (then it looks again)


class _ByProxy(httpx.BaseTransport):
    """A kept client's transport: one pool of kept connections per proxy the environment
    names (few: direct, and the HTTP, HTTPS and ALL proxies), each request sent through
    its URL's, its deadline the `within` block's. The environment is read once, when the
    client is made (reading it costs more than a kept connection's request)."""

    def __init__(self, context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._context = context
        self._limits = limits
        self._proxies = urllib.request.getproxies()
        self._proxy_of: dict[tuple[bytes, bytes, int | None], str | None] = {}
        self._pools: dict[str | None, _Transport] = {}
        self._lock = threading.Lock()

    def _proxy(self, url: httpx.URL) -> str | None:
        origin = (url.raw_scheme, url.raw_host, url.port)
        try:
            return self._proxy_of[origin]
        except KeyError:
            proxy = proxy_for(str(url), self._proxies)
        with self._lock:
            if len(self._proxy_of) >= ORIGINS_KEPT:
                self._proxy_of.clear()
            self._proxy_of[origin] = proxy
        return proxy

    def _pool(self, proxy: str | None) -> _Transport:
        with self._lock:
            if proxy not in self._pools:
                self._pools[proxy] = _Transport(_request_ends, self._context, proxy,
                                                self._limits)
            return self._pools[proxy]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._pool(self._proxy(request.url)).handle_request(request)

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
