"""Heartbeats sent on the worker's behalf while it is busy: during `evidence run`'s command
(from the command's waiting loop) and during a `waypost.run` block (from a thread).

How often: twice per heartbeat interval, so the run never reads as `late` between two
beats; with only `max_silence`, four times per silence (at most every 60 s); with neither,
every 60 s. What a failed beat means: a refusal (the lease was taken over, the run left
the states that take heartbeats, the actor may not heartbeat) will not change by trying
again, so the beats stop and the refusal is kept for whoever asks; anything else from the
store (busy, briefly unreachable) is tried again at the next beat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from waypost.errors import NotFound, Refused, WaypostError
from waypost.model import StopRules

WITHOUT_RULES: Final = 60.0  # seconds between beats when the run has no liveness rule
FASTEST: Final = 0.1  # seconds: a tiny stop rule must not turn the beats into a busy loop


def beat_every(rules: StopRules) -> float:
    """Seconds between two beats for a run with these stop rules."""
    if rules.heartbeat_interval is not None:
        every = rules.heartbeat_interval / 2
    elif rules.max_silence is not None:
        every = min(WITHOUT_RULES, rules.max_silence / 4)
    else:
        every = WITHOUT_RULES
    return max(FASTEST, every)


class Beats:
    """Calls `beat` on each tick until a beat is refused; `stopped_by` keeps the refusal."""

    def __init__(self, beat: Callable[[], object]) -> None:
        self._beat = beat
        self.stopped_by: WaypostError | None = None
        self.sent = 0

    def __call__(self) -> None:
        if self.stopped_by is not None:
            return
        try:
            self._beat()
        except (Refused, NotFound) as exc:
            self.stopped_by = exc
        except WaypostError:
            return  # busy or briefly unreachable: the next beat tries again
        else:
            self.sent += 1
