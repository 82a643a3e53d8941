"""Where deliveries go, by the URI recorded at start: `file:`, `exec:`, `none:`, and
`http(s):` (in webhook.py, so httpx is imported only when a webhook is really sent).

Each is a `delivery.base.Target`: it sends one `Outgoing` and reports an `Attempt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

from waypost.delivery import document
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.policy import Attempt, give_up, retry, sent
from waypost.delivery.settings import DeliverySettings
from waypost.model import Purpose

NOTHING_SENT = "target none: nothing was sent; nobody was told"
SCHEMES = "file:PATH, https://…, http://…, exec:COMMAND or none:"


def resolve(uri: str, settings: DeliverySettings) -> Target:
    """The target a recorded URI names; an unknown scheme gives up with a clear error."""
    if uri.startswith(("https://", "http://")):
        from waypost.delivery.webhook import WebhookTarget

        return WebhookTarget(uri, secret=settings.webhook_secret, timeout=settings.timeout)
    if uri.startswith("file:"):
        return FileTarget(Path(settings.files_root or ".") / file_path(uri))
    if uri.startswith("exec:") and uri[5:].strip():
        return ExecTarget(uri[5:].strip(), timeout=settings.timeout)
    if uri.startswith("none:"):
        return NoneTarget()
    return Unusable(f"cannot deliver to {uri!r}: a target is {SCHEMES}")


def file_path(uri: str) -> Path:
    """`file:PATH` or `file:///abs/path` (a relative path stays relative)."""
    rest = uri.removeprefix("file:")
    if rest.startswith("//"):
        rest = rest[2:]
    return Path(rest).expanduser()


class NoneTarget(Target):
    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        return sent(NOTHING_SENT)


class Unusable(Target):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        return give_up(self.reason)


class FileTarget(Target):
    """The final result written atomically (a retry with identical content is a no-op);
    notices appended as JSON lines, each key at most once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        try:
            if outgoing.delivery.purpose is Purpose.NOTICE:
                return self._append(outgoing)
            return self._write(outgoing)
        except OSError as exc:
            return retry(f"cannot write {self.path}: {exc.strerror or exc}")

    def _write(self, outgoing: Outgoing) -> Attempt:
        doc = outgoing.document
        content = (document.json_file(doc) if self.path.suffix.lower() == ".json"
                   else document.markdown(doc).encode())
        digest = hashlib.sha256(content).hexdigest()
        said = f"{self.path.resolve()} ({len(content)} bytes, sha256 {digest[:16]})"
        if self.path.is_file() and self.path.read_bytes() == content:
            return sent(f"already written: {said}")
        atomic_write(self.path, content)
        return sent(f"wrote {said}")

    def _append(self, outgoing: Outgoing) -> Attempt:
        key = outgoing.delivery.key
        if self.path.is_file() and _has_line_for(self.path, key):
            return sent(f"already appended to {self.path.resolve()}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, outgoing.body + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        return sent(f"appended to {self.path.resolve()}")


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
    """The user's own sender: the document on stdin, the key in its environment."""

    def __init__(self, command: str, *, timeout: float) -> None:
        self.command = command
        self.timeout = timeout

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        delivery = outgoing.delivery
        env = {**os.environ, "WAYPOST_DELIVERY_ID": delivery.key,
               "WAYPOST_RUN_ID": delivery.run_id, "WAYPOST_DELIVERY_TYPE": delivery.purpose,
               "WAYPOST_DELIVERY_TOPIC": delivery.topic}
        try:
            done = subprocess.run(shlex.split(self.command), input=outgoing.body, env=env,
                                  capture_output=True, timeout=self.timeout, check=False)
        except FileNotFoundError:
            return give_up(f"exec: command not found: {shlex.split(self.command)[0]}")
        except PermissionError:
            return give_up(f"exec: not executable: {shlex.split(self.command)[0]}")
        except subprocess.TimeoutExpired:
            return retry(f"exec: {self.command} did not finish within {self.timeout:g}s")
        if done.returncode == 0:
            return sent(f"exec: exit 0{_said(done.stdout)}")
        return retry(f"exec: exit {done.returncode}{_said(done.stderr or done.stdout)}")


def _said(output: bytes) -> str:
    text = " ".join(output.decode("utf-8", errors="replace").split())
    return f": {text[-300:]}" if text else ""
