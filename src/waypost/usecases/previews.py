"""What a reader may look at inside a run's stored files: each stored artifact's preview
(text, JSON, Markdown, an image, or only a download), its diff against the previous version
of the same name, and an evidence item's full log. Only for a reader who sees everything
(`core.readers`: the public view holds no artifact bytes, output or logs); every read is
bounded before it is decoded, and the result is text or bytes for a door to escape.
"""

from __future__ import annotations

import difflib
import json
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from waypost.core import readers
from waypost.core.access import Caller
from waypost.errors import NotFound
from waypost.events import ArtifactRecorded, Event
from waypost.model import Artifact, Packet
from waypost.store.base import Store

PREVIEW_BYTES: Final = 64 * 1024  # of a text artifact shown in the page
DIFF_BYTES: Final = 256 * 1024  # each side of a diff, at most
DIFF_LINES: Final = 400  # of a diff shown
VERSIONS: Final = 1000  # the latest recorded artifacts searched for a previous version
LOG_BYTES: Final = 4 * 1024 * 1024  # of an evidence log sent (its end: the log keeps its end)
IMAGES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXTS: Final = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".txt": "text",
                ".log": "text", ".diff": "text", ".patch": "text", ".csv": "text",
                ".py": "text", ".toml": "text", ".yaml": "text", ".yml": "text"}


@dataclass(frozen=True)
class Preview:
    name: str
    kind: str  # markdown / json / text / image / download
    text: str = ""  # the file's text (markdown, json, text), at most PREVIEW_BYTES
    cut: bool = False  # the text is the file's beginning only
    diff: tuple[str, ...] = ()  # unified diff lines against `previous`
    previous: str = ""  # the previous version's sha256, when there is one


def media_type(artifact: Artifact) -> str:
    """The artifact's recorded media type, else the one its name suggests."""
    if artifact.media_type != "application/octet-stream":
        return artifact.media_type
    return mimetypes.guess_type(artifact.name)[0] or artifact.media_type


def kind_of(artifact: Artifact) -> str:
    typed = media_type(artifact)
    if typed in IMAGES:
        return "image"
    dot = artifact.name.rfind(".")
    kind = TEXTS.get(artifact.name[dot:].lower()) if dot >= 0 else None
    if kind is None and typed.startswith("text/"):
        kind = "text"
    return kind or "download"


def previews(store: Store, caller: Caller | None, packet: Packet,
             events: Sequence[Event]) -> list[Preview]:
    """Each stored artifact of `packet` as `caller` may preview it (none for a reader of the
    public view). `events` are the run's (its latest `artifact_recorded` ones will do): they
    name each earlier version."""
    if readers.sight(caller, packet) is not readers.Sight.ALL:
        return []
    shown = []
    for artifact in packet.artifacts:
        if not artifact.stored or artifact.sha256 is None:
            continue
        kind = kind_of(artifact)
        if kind in ("image", "download"):
            shown.append(Preview(name=artifact.name, kind=kind))
            continue
        data = store.get_blob(artifact.sha256)
        text = _text(data[:PREVIEW_BYTES], kind)
        earlier = _previous(events, artifact)
        diff: tuple[str, ...] = ()
        if earlier is not None:
            diff = _diff(store.get_blob(earlier)[:DIFF_BYTES], data[:DIFF_BYTES],
                         artifact.name)
        shown.append(Preview(name=artifact.name, kind=kind, text=text,
                             cut=len(data) > PREVIEW_BYTES, diff=diff,
                             previous=earlier or ""))
    return shown


def _text(data: bytes, kind: str) -> str:
    text = data.decode("utf-8", errors="replace")
    if kind == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)[:PREVIEW_BYTES]
        except ValueError:
            return text
    return text


def _previous(events: Sequence[Event], artifact: Artifact) -> str | None:
    """The sha256 of the last stored version of the artifact's name before this one."""
    earlier = None
    for event in events:
        data = event.data
        if (isinstance(data, ArtifactRecorded) and data.artifact.name == artifact.name
                and data.artifact.stored and data.artifact.sha256 is not None):
            if data.artifact.sha256 == artifact.sha256:
                return earlier
            earlier = data.artifact.sha256
    return None


def _diff(before: bytes, after: bytes, name: str) -> tuple[str, ...]:
    lines = difflib.unified_diff(before.decode("utf-8", errors="replace").splitlines(),
                                 after.decode("utf-8", errors="replace").splitlines(),
                                 fromfile=f"{name} (before)", tofile=name, lineterm="")
    shown = []
    for count, line in enumerate(lines):
        if count >= DIFF_LINES:
            shown.append(f"… (the diff goes on; only the first {DIFF_LINES} lines are shown)")
            break
        shown.append(line)
    return tuple(shown)


def evidence_log(store: Store, caller: Caller | None, packet: Packet,
                 evidence_id: str) -> bytes:
    """The end (at most LOG_BYTES) of an evidence item's full log, for a reader who sees
    everything (else NotAuthorized, as for an artifact's bytes)."""
    readers.may_fetch(caller, packet, f"log of {evidence_id}")
    found = next((e for e in packet.evidence if e.id == evidence_id), None)
    if found is None or found.log_sha256 is None:
        raise NotFound(f"run {packet.id} has no log for evidence {evidence_id[:64]!r}",
                       hint="the evidence's summary says what it found")
    return store.get_blob(found.log_sha256)[-LOG_BYTES:]
