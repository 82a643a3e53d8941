"""Calls to a JSON web API (Slack's, GitHub's) for one send: every call of the send shares
one overall deadline (`waypost.system.web`), on the relay's kept-alive connections when it
has them (`delivery.connections`), and every failure becomes an
`Attempt` through the one classifier (`delivery.policy`), raised as `Failed` so a target
reads as the happy path. httpx is imported only when a call is really made."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

from waypost.delivery.connections import Connections, client_for
from waypost.delivery.policy import Attempt, retry
from waypost.delivery.webhook import after_sending, retry_after

if TYPE_CHECKING:
    import httpx

MAX_ANSWER = 16 * 1024 * 1024  # bytes of one answer read (a page of 100 long comments fits)


class Failed(Exception):
    """A call that ended the send: `attempt` says how (retry, give up)."""

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt.detail)
        self.attempt = attempt


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names
    data: Any  # the decoded JSON body (None when it was not JSON)
    retry_after: float | None  # seconds, from Retry-After

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Api:
    """One send's client: `with Api(base, headers, timeout, at) as api: api.call(...)`."""

    def __init__(self, base: str, headers: dict[str, str], *, timeout: float,
                 at: datetime, shown_as: str | None = None,
                 connections: Connections | None = None) -> None:
        self.base = base.rstrip("/")
        self.shown_as = shown_as  # how errors name the service (a URL may be a secret)
        self.headers = {"user-agent": "waypost-relay", **headers}
        self.timeout = timeout
        self.at = at
        self.connections = connections
        self._session: AbstractContextManager[httpx.Client] | None = None
        self._client: httpx.Client | None = None

    def __enter__(self) -> Api:
        self._session = client_for(self.base, self.timeout, self.connections)
        self._client = self._session.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._session is not None:
            self._session.__exit__(kind, exc, tb)
            self._session = self._client = None

    def url(self, path: str) -> str:
        return path if path.startswith(("https://", "http://")) else self.base + path

    def call(self, method: str, path: str, *, body: Any = None,
             params: dict[str, str] | None = None) -> Answer:
        """One request; a transport failure raises `Failed` (its outcome unknown when a
        request that changes something had gone out and no answer came back)."""
        import httpx

        assert self._client is not None, "use Api in a with block"
        url = self.url(path)
        where = self.shown_as or _where(url)
        writes = method != "GET"
        content = None if body is None else json.dumps(body).encode()
        headers = {**self.headers, **({"content-type": "application/json; charset=utf-8"}
                                      if content is not None else {})}
        try:
            with self._client.stream(method, url, content=content, params=params,
                                     headers=headers) as response:
                raw = _read(response, where)
                status, reason = response.status_code, response.reason_phrase
                found = {k.lower(): v for k, v in response.headers.items()}
        except httpx.TimeoutException as exc:
            raise Failed(retry(f"no answer from {where} within {self.timeout:g}s "
                               f"({type(exc).__name__})",
                               outcome_unknown=writes and after_sending(exc))) from exc
        except httpx.HTTPError as exc:
            raise Failed(retry(f"cannot reach {where}: {type(exc).__name__}: {exc}",
                               outcome_unknown=writes and after_sending(exc))) from exc
        return Answer(status=status, reason=reason, headers=found, data=_json(raw),
                      retry_after=retry_after(found.get("retry-after"), self.at))


def _read(response: httpx.Response, where: str) -> bytes:
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_ANSWER:
            raise Failed(retry(f"the answer of {where} is over "
                               f"{MAX_ANSWER} bytes"))
    return data


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _where(url: str) -> str:
    """A URL as an error may show it: no query (Slack's cursors, tokens never go there)."""
    return url.split("?", 1)[0]
