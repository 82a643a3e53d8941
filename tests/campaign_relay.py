"""One relay process of the delivery-fault campaign (`tests/integration/
test_delivery_campaign.py`) and of the batch tests: `python -m tests.campaign_relay STORE
CLOCK_FILE ROOT [TIMEOUT]` serves until it is killed, on the campaign's injected clock
(real time shifted by the seconds the clock file holds, so the campaign can expire a
killed relay's lease at once), with short timeouts and waits (TIMEOUT: seconds one send
may take). Credentials and API bases come from the environment, as in production."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from waypost.delivery.relay import Relay
from waypost.delivery.settings import load_settings
from waypost.durations import utcnow
from waypost.store import open_store

SETTINGS = {"backoff_base": 0.05, "max_delay": 0.5, "horizon": 86400.0, "timeout": 0.5}


def shifted_clock(path: Path) -> Callable[[], datetime]:
    def clock() -> datetime:
        return utcnow() + timedelta(seconds=float(path.read_text() or 0))

    return clock


def main(store: str, clock_file: str, root: str, timeout: str | None = None) -> None:
    overrides = {**SETTINGS, **({"timeout": float(timeout)} if timeout else {})}
    settings = load_settings(None, files_root=root, **overrides)
    with open_store(store) as opened:
        relay = Relay(opened, settings=settings, clock=shifted_clock(Path(clock_file)))
        relay.serve(threading.Event(), poll=0.05)


if __name__ == "__main__":
    main(*sys.argv[1:5])
