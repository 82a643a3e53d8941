"""Where deliveries go, by the URI recorded at start: `file:`, `exec:`, `none:`, and
`http(s):` (in webhook.py, so httpx is imported only when a webhook is really sent),
`slack:` and `slack-webhook:` (slack.py), `github:` and `github-status:` (github.py),
`mailto:` (mail.py). A target whose credential is not set gives up at once, naming it.

Each is a `delivery.base.Target`: it sends one `Outgoing` and reports an `Attempt`,
classified by `delivery.policy` (permanent or transient). The URI's syntax is decided again
here (`core.targets`: a run stored by an older release may hold anything), and a `file:`
path once more after symlinks are resolved, so nothing is written outside the delivery
root and the allow-list, whatever was planted after the run started.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shlex
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from waypost.core.targets import FORMS, STORE_DIR, Places, check_uri, file_destination, inside
from waypost.delivery import document
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.policy import (
    Attempt,
    for_exit,
    for_os_error,
    for_timeout,
    keyed,
    sent,
    unusable,
)
from waypost.delivery.settings import DeliverySettings, missing_credential
from waypost.errors import InvalidInput
from waypost.model import DeliveryAssurance, Purpose
from waypost.system.process import run_bounded

if TYPE_CHECKING:
    from waypost.delivery.connections import Connections

NOTHING_SENT = "target none: nothing was sent; nobody was told"


def resolve(uri: str, settings: DeliverySettings, *,
            connections: Connections | None = None) -> Target:
    """The target a recorded URI names; a malformed or unsupported one gives up, saying why.
    HTTP targets send on `connections` (kept alive between sends) when given."""
    places = settings.places
    try:
        check_uri(uri, places)
    except InvalidInput as exc:
        return Unusable(f"cannot deliver: {exc.message}; a target is {FORMS}")
    if uri.startswith(("https://", "http://")):
        from waypost.delivery.webhook import WebhookTarget

        return WebhookTarget(uri, secret=settings.webhook_secret, timeout=settings.timeout,
                             connections=connections)
    missing = missing_credential(uri, settings)
    if missing is not None:
        return Unusable(missing)
    if uri.startswith(("slack:", "slack-webhook:", "github:", "github-status:", "mailto:")):
        return _service(uri, settings, connections)
    if uri.startswith("file:"):
        return FileTarget(Path(file_destination(uri, places)), places)
    if uri.startswith("exec:"):
        return ExecTarget(uri[5:].strip(), timeout=settings.timeout)
    return NoneTarget()


def _service(uri: str, settings: DeliverySettings, kept: Connections | None) -> Target:
    """A Slack, GitHub or email target (each module imported only when it is used)."""
    s = settings
    if uri.startswith("slack:"):
        from waypost.delivery.slack import SlackTarget

        return SlackTarget(uri, token=s.slack_token, api=s.slack_api, timeout=s.timeout,
                           connections=kept)
    if uri.startswith("slack-webhook:"):
        from waypost.delivery.slack import SlackWebhookTarget

        return SlackWebhookTarget(uri.removeprefix("slack-webhook:"), timeout=s.timeout,
                                  board=s.board_url, connections=kept)
    if uri.startswith("github:"):
        from waypost.delivery.github import GitHubCommentTarget

        return GitHubCommentTarget(uri, token=s.github_token, api=s.github_api,
                                   timeout=s.timeout, connections=kept)
    if uri.startswith("github-status:"):
        from waypost.delivery.github import GitHubStatusTarget

        return GitHubStatusTarget(uri, token=s.github_token, api=s.github_api,
                                  timeout=s.timeout, board=s.board_url, connections=kept)
    from waypost.delivery.mail import Board, MailTarget

    return MailTarget(uri, smtp_url=s.smtp_url, sender=s.smtp_from, timeout=s.timeout,
                      board=Board(url=s.board_url, link_secret=s.link_secret,
                                  link_ttl=s.link_ttl))


class Outside(Exception):
    """A file: destination that resolves (through symlinks) out of its places."""


def contained(path: Path, places: Places) -> Path:
    """The real path `path` names (every symlink resolved), if that stays within `places`
    and out of the store's folder; else `Outside`, saying where it leads."""
    real = os.path.realpath(path)
    root = os.path.realpath(places.root)
    allowed = Places(root=root, allow=tuple(os.path.realpath(p) for p in places.allow))
    if not allowed.holds(real):
        raise Outside(f"{path} resolves to {real}, outside the delivery root {root} and "
                      "every place [delivery] allow_paths names (symlinks resolved)")
    if inside(real, posixpath.join(root, STORE_DIR)):
        raise Outside(f"{path} resolves to {real}, inside the store's own {STORE_DIR}/")
    return Path(real)


class NoneTarget(Target):
    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        return sent(NOTHING_SENT, DeliveryAssurance.NONE)


class Unusable(Target):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        return unusable(self.reason)


class FileTarget(Target):
    """The final result written atomically (a retry with identical content is a no-op);
    notices appended as JSON lines, each key at most once. Only within `places`."""

    def __init__(self, path: Path, places: Places) -> None:
        self.path = path
        self.places = places

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        try:
            real = contained(self.path, self.places)
        except Outside as exc:
            return unusable(f"cannot write {self.path}: {exc}")
        try:
            if outgoing.delivery.purpose is Purpose.NOTICE:
                return _append(real, outgoing)
            return _write(real, outgoing)
        except OSError as exc:
            return for_os_error(exc, f"cannot write {self.path}")


def _write(path: Path, outgoing: Outgoing) -> Attempt:
    doc = outgoing.document
    content = (document.json_file(doc) if path.suffix.lower() == ".json"
               else document.markdown(doc).encode())
    digest = hashlib.sha256(content).hexdigest()
    said = f"{path} ({len(content)} bytes, sha256 {digest[:16]})"
    if path.is_file() and path.stat().st_size == len(content) and \
            path.read_bytes() == content:
        return sent(f"already written: {said}", DeliveryAssurance.IDEMPOTENT)
    atomic_write(path, content)
    return sent(f"wrote {said}", DeliveryAssurance.IDEMPOTENT)


def _append(path: Path, outgoing: Outgoing) -> Attempt:
    key = outgoing.delivery.key
    if path.is_file() and _has_line_for(path, key):
        return sent(f"already appended to {path}", DeliveryAssurance.IDEMPOTENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink swapped in after `contained` looked is refused, not followed
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, outgoing.body + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return sent(f"appended to {path}", DeliveryAssurance.IDEMPOTENT)


def _has_line_for(path: Path, key: str) -> bool:
    for line in path.read_text("utf-8", errors="replace").splitlines():
        try:
            if json.loads(line).get("id") == key:
                return True
        except (ValueError, AttributeError):
            continue
    return False


def atomic_write(path: Path, content: bytes) -> None:
    """Temp file beside `path`, fsync, rename over it, fsync the folder: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class ExecTarget(Target):
    """The user's own sender: the document on stdin, the key in its environment. It runs in
    a session of its own, killed whole at the timeout; only the tail of its output is kept."""

    def __init__(self, command: str, *, timeout: float) -> None:
        self.command = command
        self.timeout = timeout

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        delivery = outgoing.delivery
        env = {**os.environ, "WAYPOST_DELIVERY_ID": delivery.key,
               "WAYPOST_RUN_ID": delivery.run_id, "WAYPOST_DELIVERY_TYPE": delivery.purpose,
               "WAYPOST_DELIVERY_TOPIC": delivery.topic}
        argv = shlex.split(self.command)
        try:
            done = run_bounded(argv, timeout=self.timeout, max_output=OUTPUT_TAIL, env=env,
                               stdin=outgoing.body)
            code, output = done.exit_code, done.output
        except FileNotFoundError:
            return unusable(f"exec: command not found: {argv[0]}")
        except PermissionError:
            return unusable(f"exec: not executable: {argv[0]}")
        except OSError as exc:
            return for_os_error(exc, f"exec: cannot run {argv[0]}")
        if code is None:
            return for_timeout(f"exec: {self.command}", self.timeout)
        return keyed(for_exit(code, _said(output)))


OUTPUT_TAIL = 4096  # bytes of an exec: target's output kept (for the receipt or the error)


def _said(output: bytes) -> str:
    text = " ".join(output.decode("utf-8", errors="replace").split())
    return f": {text[-300:]}" if text else ""
