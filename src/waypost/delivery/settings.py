"""Relay settings: `[delivery]` in waypost.toml, `WAYPOST_WEBHOOK_SECRET`, and CLI flags.

    [delivery]
    backoff_base = "5s"      # first retry delay; doubles per attempt, with jitter
    max_delay = "1h"         # no single wait is longer than this
    horizon = "3d"           # past this since the delivery was queued, it fails for good
    timeout = "30s"          # one send (HTTP request or exec command) is cut off after this
    concurrency = 8          # sends in flight at once (claimed together, one per run)
    webhook_secret = "whsec_…"   # WAYPOST_WEBHOOK_SECRET wins when both are set
    allow_paths = ["/srv/reports", "~/reports"]   # file: targets may also write here
    slack_token = "xoxb-…"       # SLACK_BOT_TOKEN wins
    slack_api = "https://slack.com/api"          # WAYPOST_SLACK_API wins
    github_token = "ghp_…"       # GITHUB_TOKEN wins
    github_api = "https://api.github.com"        # GITHUB_API_URL wins (GitHub Enterprise)
    smtp_url = "smtp://user:pass@host:587?starttls=1"   # WAYPOST_SMTP_URL wins
    smtp_from = "waypost@example.com"            # WAYPOST_SMTP_FROM wins
    board_url = "https://board.example.com"      # WAYPOST_BOARD_URL wins: status links
    link_ttl = "7d"          # how long the sign-in link a ready-for-review mail carries lasts

The links a mail carries are signed with `WAYPOST_LINK_SECRET`, read from the environment
alone (never from waypost.toml): without it, or without a board URL, a mail carries none.

`file:` targets write under the delivery root: `waypost deliver --dir`, else the folder
holding `.waypost/` (an embedded store), else the folder holding waypost.toml, else the
current folder; and under the folders `allow_paths` names (`~` and paths relative to
waypost.toml's folder are expanded when the file is read). Nowhere else.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from waypost.config import find_config, read_toml
from waypost.core import links
from waypost.core.links import check_secret
from waypost.core.targets import STORE_DIR, Places
from waypost.durations import parse_duration
from waypost.errors import InvalidInput

SECRET_ENV = "WAYPOST_WEBHOOK_SECRET"
_DURATIONS = ("backoff_base", "max_delay", "horizon", "timeout", "link_ttl")
# [delivery] key -> the environment variable that wins over it
ENVIRONMENT = {"webhook_secret": SECRET_ENV, "slack_token": "SLACK_BOT_TOKEN",
               "slack_api": "WAYPOST_SLACK_API", "github_token": "GITHUB_TOKEN",
               "github_api": "GITHUB_API_URL", "smtp_url": "WAYPOST_SMTP_URL",
               "smtp_from": "WAYPOST_SMTP_FROM", "board_url": "WAYPOST_BOARD_URL"}
_OTHERS = (*ENVIRONMENT, "allow_paths", "concurrency")
MOST_CONCURRENT = 64  # the most sends a relay may have in flight at once


class DeliverySettings(msgspec.Struct, frozen=True, kw_only=True):
    backoff_base: float = 5.0  # seconds before the first retry; doubles per attempt
    max_delay: float = 3600.0  # the longest single wait between attempts
    horizon: float = 3 * 86400.0  # retries stop this long after the delivery was queued
    timeout: float = 30.0  # one send is cut off after this
    concurrency: int = 8  # sends in flight at once; also the relay's kept connections
    webhook_secret: str | None = None  # whsec_… (Standard Webhooks), for http(s) targets
    files_root: str | None = None  # relative file: targets resolve here (None: the cwd)
    allow_paths: tuple[str, ...] = ()  # absolute folders file: targets may write to as well
    slack_token: str | None = None  # a bot token (xoxb-…) for slack: targets
    slack_api: str = "https://slack.com/api"  # the Slack Web API's base
    github_token: str | None = None  # for github: and github-status: targets
    github_api: str = "https://api.github.com"  # the REST API's base (Enterprise: …/api/v3)
    smtp_url: str | None = None  # smtp(s)://[user:pass@]host[:port][?starttls=1]
    smtp_from: str | None = None  # the sender of mailto: deliveries
    board_url: str | None = None  # where a commit status and a mail's link lead (the board)
    link_secret: str | None = None  # WAYPOST_LINK_SECRET: signs the links mails carry
    link_ttl: float = 7 * 86400.0  # how long such a link lasts after its mail was queued

    def __repr__(self) -> str:  # tokens and the SMTP password never reach a log
        return "DeliverySettings(…)"

    def __post_init__(self) -> None:
        for name in ("backoff_base", "max_delay", "timeout", "link_ttl"):
            if getattr(self, name) <= 0:
                raise InvalidInput(f"the delivery {name.replace('_', ' ')} must be more than 0",
                                   hint="e.g. deliver --backoff-base 0.2s --timeout 30s")
        if not 1 <= self.concurrency <= MOST_CONCURRENT:
            raise InvalidInput(f"the delivery concurrency must be 1 to {MOST_CONCURRENT}, "
                               f"not {self.concurrency}", hint="e.g. [delivery] concurrency = 8")
        if self.link_secret is not None:
            check_secret(self.link_secret)

    @property
    def lease(self) -> float:
        """How long a claimed delivery is held: past one whole send, with room to record."""
        return self.timeout * 2 + 30.0

    @property
    def places(self) -> Places:
        """Where file: targets may write (the root made absolute: the cwd when unset)."""
        return Places(root=os.path.abspath(self.files_root or "."), allow=self.allow_paths)


def missing_credential(uri: str, settings: DeliverySettings) -> str | None:
    """Why the relay cannot send to `uri` as configured (a credential it needs is not
    set), or None. `doctor` reports it, `start` warns, and delivery blocks the run."""
    if uri.startswith("slack:") and not settings.slack_token:
        return "SLACK_BOT_TOKEN is not set (nor [delivery] slack_token)"
    if uri.startswith(("github:", "github-status:")) and not settings.github_token:
        return "GITHUB_TOKEN is not set (nor [delivery] github_token)"
    if uri.startswith("mailto:"):
        if not settings.smtp_url:
            return "WAYPOST_SMTP_URL is not set (nor [delivery] smtp_url)"
        if not settings.smtp_from:
            return "WAYPOST_SMTP_FROM is not set (nor [delivery] smtp_from)"
    return None


def credential_warnings(uris: dict[str, str | None],
                        start: str | os.PathLike[str] | None = None) -> list[str]:
    """What `start` warns of: each of `uris` (field -> URI) whose credential the relay here
    would not find. A [delivery] table that does not read is the relay's to report."""
    try:
        settings = load_settings(start)
    except InvalidInput:
        return []
    found = [(field, uri, missing_credential(uri, settings))
             for field, uri in uris.items() if uri]
    return [f"{field} {uri}: {why}: a relay here would block the run with delivery_failed "
            "until it is set" for field, uri, why in found if why]


def delivery_root(store_path: str | None, config_path: str | None) -> str:
    """Where relative file: targets start: the folder holding `.waypost/` for an embedded
    store in one, else the folder holding waypost.toml, else the current folder."""
    if store_path:
        folder = os.path.dirname(os.path.abspath(store_path))
        if os.path.basename(folder) == STORE_DIR:
            return os.path.dirname(folder)
    if config_path:
        return os.path.dirname(os.path.abspath(config_path))
    return os.path.abspath(".")


def places_at_start(store_path: str | None, config_path: str | None) -> Places:
    """Where a run being started may name a file: target (decided again at delivery)."""
    allow = _allow_paths(read_toml(config_path), config_path) if config_path else ()
    return Places(root=delivery_root(store_path, config_path), allow=allow)


def load_settings(start: str | os.PathLike[str] | None = None,
                  **overrides: Any) -> DeliverySettings:
    """`[delivery]` from waypost.toml, the secret from the environment, then `overrides`
    (CLI flags; None values are ignored)."""
    values: dict[str, Any] = {}
    path = find_config(start)
    if path is not None:
        values.update(_table(path))
    for key, env in ENVIRONMENT.items():
        if os.environ.get(env):
            values[key] = os.environ[env]
    if os.environ.get(links.SECRET_ENV):
        values["link_secret"] = os.environ[links.SECRET_ENV]
    values.update({k: v for k, v in overrides.items() if v is not None})
    return DeliverySettings(**values)


def _table(path: str) -> dict[str, Any]:
    raw = read_toml(path).get("delivery", {})
    unknown = set(raw) - {*_DURATIONS, *_OTHERS}
    if unknown:
        raise InvalidInput(f"{path}: unknown key(s) in [delivery]: {', '.join(sorted(unknown))}",
                           hint=f"known: {', '.join((*_DURATIONS, *_OTHERS))}")
    values: dict[str, Any] = {k: parse_duration(str(raw[k])) for k in _DURATIONS if k in raw}
    values.update({k: str(raw[k]) for k in ENVIRONMENT if k in raw})
    if "allow_paths" in raw:
        values["allow_paths"] = _allow_paths({"delivery": raw}, path)
    if "concurrency" in raw:
        if not isinstance(raw["concurrency"], int) or isinstance(raw["concurrency"], bool):
            raise InvalidInput(f"{path}: [delivery] concurrency must be a whole number",
                               hint="e.g. concurrency = 8")
        values["concurrency"] = raw["concurrency"]
    return values


def _allow_paths(toml: dict[str, Any], path: str) -> tuple[str, ...]:
    """`[delivery] allow_paths`: absolute, normalised folders (`~` expanded, relative ones
    from the folder holding waypost.toml)."""
    raw = toml.get("delivery", {}).get("allow_paths", [])
    if not isinstance(raw, list) or not all(isinstance(p, str) and p.strip() for p in raw):
        raise InvalidInput(f"{path}: [delivery] allow_paths must be a list of folders",
                           hint='e.g. allow_paths = ["/srv/reports"]')
    here = os.path.dirname(os.path.abspath(path))
    return tuple(os.path.normpath(os.path.join(here, os.path.expanduser(p))) for p in raw)
