"""Relay settings: `[delivery]` in waypost.toml, `WAYPOST_WEBHOOK_SECRET`, and CLI flags.

    [delivery]
    backoff_base = "5s"      # first retry delay; doubles per attempt, with jitter
    max_delay = "1h"         # no single wait is longer than this
    horizon = "3d"           # past this since the delivery was queued, it fails for good
    timeout = "30s"          # one send (HTTP request or exec command) is cut off after this
    webhook_secret = "whsec_…"   # WAYPOST_WEBHOOK_SECRET wins when both are set
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from waypost.config import find_config, read_toml
from waypost.durations import parse_duration
from waypost.errors import InvalidInput

SECRET_ENV = "WAYPOST_WEBHOOK_SECRET"
_DURATIONS = ("backoff_base", "max_delay", "horizon", "timeout")


class DeliverySettings(msgspec.Struct, frozen=True, kw_only=True):
    backoff_base: float = 5.0  # seconds before the first retry; doubles per attempt
    max_delay: float = 3600.0  # the longest single wait between attempts
    horizon: float = 3 * 86400.0  # retries stop this long after the delivery was queued
    timeout: float = 30.0  # one send is cut off after this
    webhook_secret: str | None = None  # whsec_… (Standard Webhooks), for http(s) targets
    files_root: str | None = None  # relative file: targets resolve here (None: the cwd)

    def __post_init__(self) -> None:
        for name in ("backoff_base", "max_delay", "timeout"):
            if getattr(self, name) <= 0:
                raise InvalidInput(f"the delivery {name.replace('_', ' ')} must be more than 0",
                                   hint="e.g. deliver --backoff-base 0.2s --timeout 30s")

    @property
    def lease(self) -> float:
        """How long a claimed delivery is held: past one whole send, with room to record."""
        return self.timeout * 2 + 30.0


def load_settings(start: str | os.PathLike[str] | None = None,
                  **overrides: Any) -> DeliverySettings:
    """`[delivery]` from waypost.toml, the secret from the environment, then `overrides`
    (CLI flags; None values are ignored)."""
    values: dict[str, Any] = {}
    path = find_config(start)
    if path is not None:
        values.update(_table(path))
    if os.environ.get(SECRET_ENV):
        values["webhook_secret"] = os.environ[SECRET_ENV]
    values.update({k: v for k, v in overrides.items() if v is not None})
    return DeliverySettings(**values)


def _table(path: str) -> dict[str, Any]:
    raw = read_toml(path).get("delivery", {})
    unknown = set(raw) - {*_DURATIONS, "webhook_secret"}
    if unknown:
        raise InvalidInput(f"{path}: unknown key(s) in [delivery]: {', '.join(sorted(unknown))}",
                           hint=f"known: {', '.join((*_DURATIONS, 'webhook_secret'))}")
    values: dict[str, Any] = {k: parse_duration(str(raw[k])) for k in _DURATIONS if k in raw}
    if "webhook_secret" in raw:
        values["webhook_secret"] = str(raw["webhook_secret"])
    return values
