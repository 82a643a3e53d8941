"""7. Delivery: approved -> delivered per second, through the relay, to a local webhook.

Before each sample (outside the clock) a batch of runs is taken to `approved` (start, claim,
evidence, ready, review, approve), which queues each one's final delivery. The sample is the
relay draining them: claim, build and sign the document, POST it to a receiver on
127.0.0.1 (its own process), and commit the receipt with the run's `delivered` event.
Baselines, in the same rounds, against the same receiver: the same number of bare httpx
POSTs of a 2 KB body, each on a new connection (as the relay sends) and all on one
kept-alive connection (the receiver's limit). Beside them, the floor the relay's own work
sets: the same relay with its HTTP send taken out (each document still built and signed,
each receipt committed with its event), so the target's room for any HTTP client shows.
"""

from __future__ import annotations

import base64
import functools
import multiprocessing
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.queues import Queue
from pathlib import Path
from typing import TYPE_CHECKING, Any

import waypost
from bench import pending
from bench.harness import Section, check, figures, interleave

if TYPE_CHECKING:
    from waypost.delivery.base import Target
    from waypost.delivery.settings import DeliverySettings
    from waypost.delivery.webhook import WebhookTarget

RELAY = "waypost relay: approved -> delivered"
NO_SEND = "the same relay, its HTTP send taken out"
NEW_CONNECTION = "bare httpx POST, new connection each"
KEPT_ALIVE = "bare httpx POST, one kept-alive connection"


class _Hook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


class _Receiver(ThreadingHTTPServer):
    request_queue_size = 128  # the relay's 8 concurrent sends must not overflow the backlog


def _receive(ports: Queue[Any]) -> None:
    server = _Receiver(("127.0.0.1", 0), _Hook)
    ports.put(server.server_address[1])
    server.serve_forever()


def receiver(stack: ExitStack) -> str:
    """A webhook receiver in its own process; its URL. Stopped when `stack` closes."""
    context = multiprocessing.get_context("spawn")
    ports: Queue[Any] = context.Queue()
    process = context.Process(target=_receive, args=(ports,), daemon=True)
    process.start()
    stack.callback(process.join, 10)
    stack.callback(process.terminate)
    return f"http://127.0.0.1:{ports.get(timeout=60)}/hook"


def approved(store: waypost.Store, target: str, count: int) -> list[str]:
    """`count` runs taken to approved (the owner reviews, then approves), each with its
    final delivery queued."""
    from waypost.config import Config

    made, config = [], Config()
    for number in range(count):
        run, _ = waypost.start(store, f"Deliver result {number}", actor="owner",
                               owner="owner", target=target, kind=waypost.Kind.BOUNDED)
        worker = waypost.Run(store, run.id, actor="worker-1")
        worker.claim()
        worker.report_evidence(waypost.EvidenceKind.TEST, waypost.Verdict.PASSED,
                               "412 passed, 0 failed")
        worker.ready("fixed the race in the login test")
        owner = waypost.Run(store, run.id, actor="owner")
        owner.review(config=config)
        owner.approve()
        made.append(run.id)
    return made


def relay_sample(stack: ExitStack, store: waypost.Store, target: str, count: int, *,
                 send: bool = True) -> Callable[[], float]:
    """The relay as `waypost deliver` runs it: its default concurrency, its connections
    kept alive from one drain to the next (closed when `stack` closes). Without `send`,
    each webhook is built and signed as for sending, and answered 200 without HTTP."""
    from waypost.delivery.relay import Relay
    from waypost.delivery.settings import DeliverySettings

    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    relay = stack.enter_context(Relay(
        store, settings=DeliverySettings(webhook_secret=secret, timeout=10.0),
        relay_id="bench" if send else "bench-no-send",
        targets=None if send else _signed_only))

    def sample() -> float:
        runs = approved(store, target, count)
        start = time.perf_counter()
        done = relay.drain()
        elapsed = time.perf_counter() - start
        states = {store.get(run_id).state for run_id in runs}
        if len(done) != count or states != {waypost.State.DELIVERED}:
            errors = {d.last_error for d in done if d.last_error}
            raise SystemExit(f"bench: {len(done)} of {count} deliveries made, runs {states}: "
                             f"{errors}")
        return count / elapsed

    return sample


def _signed_only(uri: str, settings: DeliverySettings) -> Target:
    """A webhook target whose send signs the document and answers 200 without HTTP."""
    return _signed_only_class()(uri, secret=settings.webhook_secret, timeout=settings.timeout)


@functools.cache
def _signed_only_class() -> type[WebhookTarget]:
    """Made once (the relay imports its targets when it runs, not when the bench loads)."""
    from datetime import datetime

    from waypost.delivery import policy
    from waypost.delivery.base import Outgoing
    from waypost.delivery.webhook import WebhookTarget

    class SignedOnly(WebhookTarget):
        def send(self, outgoing: Outgoing, *, at: datetime) -> policy.Attempt:
            self.headers(outgoing, at)
            return policy.keyed(policy.for_status(200, "OK"))

    return SignedOnly


def bare_sample(target: str, count: int, *, keep_alive: bool) -> Callable[[], float]:
    import ssl

    import httpx

    body = b'{"document":"' + b"d" * 2030 + b'"}'
    headers = {"content-type": "application/json"}
    tls = ssl.create_default_context()  # built once, as the relay's is

    def sample() -> float:
        start = time.perf_counter()
        if keep_alive:
            with httpx.Client(verify=tls) as client:
                for _ in range(count):
                    client.post(target, content=body, headers=headers).raise_for_status()
        else:
            for _ in range(count):
                with httpx.Client(verify=tls) as client:
                    client.post(target, content=body, headers=headers).raise_for_status()
        return count / (time.perf_counter() - start)

    return sample


def run(folder: Path, *, rounds: int, batch: int) -> Section:
    section = Section(key="delivery", title=pending.DELIVERY_TITLE, unit="ops/s",
                      higher_is_better=True)
    with ExitStack() as stack:
        target = receiver(stack)
        store = stack.enter_context(waypost.open_store(str(folder / "delivery.db")))
        subjects = {RELAY: relay_sample(stack, store, target, batch),
                    NO_SEND: relay_sample(stack, store, target, batch, send=False),
                    NEW_CONNECTION: bare_sample(target, batch, keep_alive=False),
                    KEPT_ALIVE: bare_sample(target, batch, keep_alive=True)}
        for subject in subjects.values():
            subject()  # warm up: imports, connections, caches
        samples = interleave(subjects, rounds)
    section.figures = figures(samples)
    fresh = section.add_ratio("relay / bare POST, new connection", RELAY, NEW_CONNECTION)
    section.add_ratio("relay / bare POST, kept alive", RELAY, KEPT_ALIVE)
    floor = section.add_ratio("relay without its send / bare POST, new connection (the floor)",
                              NO_SEND, NEW_CONNECTION)
    section.targets = [check("relay: approved -> delivered >= 0.8x a bare POST on a new "
                             "connection", fresh.median, 0.8, at_least=True,
                             detail=f"the floor, the relay without its send: "
                             f"{floor.median:.2f}x")]
    section.notes.append(f"{batch} deliveries per sample, {rounds} interleaved rounds; each "
                         "delivery signed (Standard Webhooks) and committed with its event")
    return section
