"""Heartbeat clients that cost the bench little, so that the server is what is measured:
kept-alive HTTP/1.1 connections on one asyncio loop, each sending its pre-built request
and reading the answer, one after another (50 httpx clients in threads spent more of the
2 cores than the server they measured).

Each answer is read whole: its status line, headers (at most 64 KiB) and a body of the
length it declares (at most 4 MiB); an answer that declares none ends its client, as an
error. Every other answer than 200, and every failed connection, is an error."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from urllib.parse import urlsplit

HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 4 * 1024 * 1024


def _request(host: str, run_id: str, token: str) -> bytes:
    body = json.dumps({"note": "beat", "epoch": 1}).encode()
    return (f"POST /api/runs/{run_id}/heartbeat HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _answer(reader: asyncio.StreamReader) -> int:
    """The status of one response, its body read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                   if k.strip().lower() == "content-length"), None)
    if length is None or not 0 <= length <= BODY_LIMIT:
        raise ValueError("a response without a usable Content-Length")
    await reader.readexactly(length)
    return status


async def _client(address: tuple[str, int], request: bytes, until: float, label: str,
                  errors: Counter[str]) -> int:
    done = 0
    reader, writer = await asyncio.open_connection(*address, limit=HEAD_LIMIT)
    try:
        while time.monotonic() < until:
            writer.write(request)
            status = await _answer(reader)
            if status == 200:
                done += 1
            else:
                errors[f"{label}: {status}"] += 1
    finally:
        writer.close()
    return done


async def _all(address: tuple[str, int], requests: list[bytes], until: float, label: str,
               errors: Counter[str]) -> int:
    done = await asyncio.gather(*(_client(address, r, until, label, errors) for r in requests),
                                return_exceptions=True)
    total = 0
    for d in done:
        if isinstance(d, BaseException):
            errors[f"{label}: {type(d).__name__}: {d}"[:160]] += 1
        else:
            total += d
    return total


def window(base: str, runs: list[tuple[str, str]], seconds: float, errors: Counter[str],
           label: str) -> float:
    """Each run's worker heartbeats it over its own connection for `seconds`; the aggregate
    rate of 200 answers."""
    parts = urlsplit(base)
    assert parts.hostname
    assert parts.port
    requests = [_request(parts.netloc, run, token) for run, token in runs]
    began = time.monotonic()
    total = asyncio.run(_all((parts.hostname, parts.port), requests, began + seconds, label,
                             errors))
    return total / (time.monotonic() - began)
