"""The answers queue's part of the store contract: answers from Slack and GitHub, kept
from the moment their request was accepted until they were carried out.

A service wants its request answered at once (Slack within three seconds), so a request is
only decided (signed, well-formed) and stored; the work is done after, by whichever server
process claims it. A request the service retries, or someone replays, carries the same key:
it is stored once, so it is carried out once. A server that dies while carrying one out
leaves its claim to expire, and the next claim carries it out again (`usecases.answers`
makes that second time change nothing that was already done)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import NamedTuple


class AnswerRow(NamedTuple):
    """One stored answer."""

    key: str  # the service's request: `slack:…`, `github:DELIVERY`
    body: bytes  # the answer as accepted (JSON)
    attempts: int  # claims so far
    done: bool
    outcome: bytes | None  # what it came to (JSON), once done


class AnswerQueue(ABC):
    """Durable answers, the same for every process and host using the store."""

    @abstractmethod
    def accept_answer(self, key: str, *, source: str, run_id: str, body: bytes,
                      at: datetime) -> bool:
        """Store an answer under `key`; False (and nothing written) when the key is
        already stored: a retry or a replay of the same request."""

    @abstractmethod
    def claim_answers(self, worker: str, *, now: datetime, lease_s: float,
                      limit: int) -> list[AnswerRow]:
        """Claim up to `limit` answers not yet done and not claimed by a live claim
        (oldest first) for `lease_s` seconds."""

    @abstractmethod
    def finish_answer(self, key: str, worker: str, *, outcome: bytes, at: datetime) -> bool:
        """Record what the answer came to; False when `worker` no longer holds its claim
        (it expired and another took it) or it is already done."""

    @abstractmethod
    def answer_row(self, key: str) -> AnswerRow | None:
        """The answer stored under `key`, if any."""
