"""Recording artifacts: files are copied into the store's content-addressed blob area, so
the parent can fetch them after the worker's machine is gone; URLs are references."""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
from datetime import datetime
from pathlib import Path

from waypost.errors import IntegrityError, InvalidInput, NotFound, RuleViolation
from waypost.model import Artifact, ArtifactRole
from waypost.store.base import Store

_NAME = re.compile(r"^[A-Za-z0-9._+@-][A-Za-z0-9 ._+@-]{0,199}$")


def check_name(name: str) -> str:
    """Artifact names are plain file names: no separators, no `..`, nothing hidden."""
    if not _NAME.match(name) or name in {".", ".."} or name.startswith(".."):
        raise InvalidInput(
            f"bad artifact name {name!r}: use a plain file name (letters, digits, . _ - + @)",
            hint="pass --name report.md",
        )
    return name


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def from_source(store: Store, source: str, *, role: ArtifactRole, name: str | None,
                max_bytes: int, at: datetime, by: str) -> Artifact:
    """The record of `source` (a file path or an http(s) URL) as an artifact; a file's bytes
    are stored as a blob now."""
    if is_url(source):
        label = check_name(name or source.rstrip("/").rsplit("/", 1)[-1] or "link")
        return Artifact(name=label, role=role, url=source, media_type=_media_type(label),
                        recorded_at=at, recorded_by=by)
    path = Path(source)
    if not path.is_file():
        raise NotFound(f"no file {source}", hint="check the path, or pass an http(s) URL")
    size = path.stat().st_size
    if size > max_bytes:
        raise RuleViolation(
            f"{source} is {size} bytes, above the artifact limit of {max_bytes} bytes",
            hint="raise [limits] max_artifact_bytes in waypost.toml, or record a URL instead",
        )
    data = path.read_bytes()
    digest = store.put_blob(data)
    label = check_name(name or path.name)
    return Artifact(name=label, role=role, path=source, sha256=digest, bytes=len(data),
                    media_type=_media_type(label), stored=True, recorded_at=at,
                    recorded_by=by)


def fetch(store: Store, run_id: str, name: str) -> tuple[Artifact, bytes]:
    """The artifact's stored bytes, checked against the recorded sha256."""
    packet = store.get(run_id)
    artifact = packet.artifact(name)
    if artifact is None:
        names = ", ".join(a.name for a in packet.artifacts) or "none"
        raise NotFound(f"run {packet.id} has no artifact {name!r} (recorded: {names})")
    if not artifact.stored or artifact.sha256 is None:
        raise NotFound(f"artifact {name!r} of {packet.id} is a reference, not stored: "
                       f"{artifact.url or artifact.path}")
    data = store.get_blob(artifact.sha256)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise IntegrityError(f"blob of artifact {name!r} does not match its sha256")
    return artifact, data


def write_out(data: bytes, name: str, output: str | None) -> Path:
    """Write to `output` (a file, or a directory to put `name` in), atomically."""
    target = Path(output) if output else Path.cwd() / check_name(name)
    if target.is_dir():
        target = target / check_name(name)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(target)
    return target


def _media_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed is None and name.endswith(".md"):
        return "text/markdown"
    return guessed or "application/octet-stream"
