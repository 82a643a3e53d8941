"""What every delivery target is: it sends one `Outgoing` and reports an `Attempt` (sent
with the receipt, retry, or give up), never touching the store; the relay records what it
reports. `RecordingTarget` is the public stand-in for tests: it records what it was sent
and answers from a script.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from waypost.delivery import document
from waypost.delivery.policy import Attempt, sent
from waypost.delivery.settings import DeliverySettings
from waypost.model import Delivery


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery about to be attempted, with the document it carries."""

    delivery: Delivery
    document: dict[str, Any]
    owner: str = ""  # the run's owner as stored (the document's may be redacted)
    # the run's other deliveries as they stood: a Slack target finds the message its
    # notices update, and the thread its final result goes in, in their receipts
    earlier: tuple[Delivery, ...] = ()

    @property
    def body(self) -> bytes:
        return document.body(self.document)


class Target(ABC):
    """Where deliveries of one recorded URI go."""

    @abstractmethod
    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        """Try once; report what happened (never raise for the target's own failures)."""


Resolver = Callable[[str, DeliverySettings], Target]  # the target a recorded URI names


class RecordingTarget(Target):
    """Records what it was sent (`sent`) and answers from `script`, then `sent`; give the
    relay its `resolver` to send every delivery here."""

    def __init__(self, script: Sequence[Attempt] = ()) -> None:
        self.script = list(script)
        self.sent: list[Outgoing] = []

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        self.sent.append(outgoing)
        return self.script.pop(0) if self.script else sent("recorded: accepted")

    def resolver(self) -> Resolver:
        return lambda uri, settings: self
