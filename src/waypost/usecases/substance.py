"""Substantive content: an artifact's stored copy is there, intact and unchanged on disk,
and holds real content (not empty, not whitespace, not a placeholder such as TODO, TBD or
lorem ipsum; enough bytes and words; valid JSON for .json). The `artifact:` check, the
review and `ready` all decide by these rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from waypost.config import Config
from waypost.errors import NotFound, RuleViolation, step
from waypost.model import Artifact, Packet
from waypost.store.base import Store

MARKERS: Final = ("todo", "tbd", "tba", "tbc", "fixme", "xxx", "wip", "placeholder")
_MARKER_LINE = re.compile(r"^\s*(?:(?:[#>*+-]+|\d+[.)])\s*)*(?:\[[ xX]?\]\s*)?"
                          r"(?P<marker>" + "|".join(MARKERS) + r")\b", re.IGNORECASE)
_TEMPLATE = re.compile(r"lorem ipsum|\b(?:content|text|description|summary|details?) goes here"
                       r"|\b(?:insert|add|put|your) (?:\w+ )?(?:text|content) here"
                       r"|\bcoming soon\b", re.IGNORECASE)
_WORD = re.compile(r"\w*[^\W\d_]\w*")


def _words(text: str) -> tuple[list[str], list[str]]:
    """(substantive words, placeholder markers): a line that starts with a marker is a note."""
    words: list[str] = []
    markers: list[str] = []
    for line in text.splitlines():
        marker = _MARKER_LINE.match(line)
        if marker:
            markers.append(marker.group("marker").upper())
            continue
        for word in _WORD.findall(line):
            if word.lower() in MARKERS:
                markers.append(word.upper())
            else:
                words.append(word)
    return words, list(dict.fromkeys(markers))


def substance_problem(name: str, data: bytes, *, min_bytes: int, min_words: int) -> str | None:
    """Why `data` is not substantive content, or None when it is."""
    from waypost.core.sanitize import text_of

    if not data:
        return f"{name} is empty (0 bytes)"
    text = text_of(data)
    if text is not None:
        problem = _text_problem(name, text, min_words)
        if problem:
            return problem
    if len(data) < min_bytes:
        return (f"{name} is only {len(data)} bytes (at least {min_bytes} expected; "
                f"[limits] min_artifact_bytes)")
    return None


def _text_problem(name: str, text: str, min_words: int) -> str | None:
    if not text.strip():
        return f"{name} is only whitespace"
    if name.lower().endswith(".json"):
        return _json_problem(name, text)
    template = _TEMPLATE.search(text)
    if template:
        return f'{name} holds placeholder text ("{template.group(0)}")'
    words, markers = _words(text)
    if markers and len(words) < min_words:
        rest = f" besides {len(words)} other word(s)" if words else ""
        return f"{name} says only {', '.join(markers)}{rest}"
    if len(words) < min_words:
        return (f"{name} has only {len(words)} word(s) (at least {min_words} expected; "
                f"[limits] min_artifact_words)")
    return None


def _json_problem(name: str, text: str) -> str | None:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if value in (None, "", [], {}):
        return f"{name} holds only an empty JSON value ({text.strip()[:20]})"
    return None


def stored_bytes(store: Store, artifact: Artifact) -> tuple[bytes | None, str | None]:
    """(the stored copy, None) when it is there and intact, else (None, why not)."""
    if not artifact.stored or artifact.sha256 is None:
        return None, (f"{artifact.name} is a reference ({artifact.url or artifact.path}), "
                      "not a stored copy: its content cannot be verified")
    try:
        data = store.get_blob(artifact.sha256)
    except NotFound:
        return None, f"the stored copy of {artifact.name} is missing from the store"
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        return None, f"the stored copy of {artifact.name} does not match its sha256 (hash mismatch)"
    return data, None


def changed_on_disk(artifact: Artifact, cwd: str | None) -> str | None:
    """The file it was recorded from (relative to `cwd`), if still there, must still hold
    the recorded bytes."""
    path = Path(cwd or ".") / artifact.path if artifact.path else None
    if path is None or artifact.sha256 is None or not path.is_file():
        return None
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest == artifact.sha256:
        return None
    return (f"{artifact.name} changed after it was recorded (hash mismatch: {artifact.path} is "
            f"now sha256 {digest[:12]}…, the recorded copy {artifact.sha256[:12]}…)")


def require_substantive(store: Store, packet: Packet, names: Sequence[str],
                        config: Config) -> None:
    """Refuse (before any event) a result that names an empty or placeholder artifact."""
    for name in names:
        artifact = packet.artifact(name)
        if artifact is None or not artifact.stored:
            continue  # never recorded: the state machine names it; a URL: nothing to read
        data, problem = stored_bytes(store, artifact)
        if data is not None:
            problem = substance_problem(name, data, min_bytes=config.min_artifact_bytes,
                                        min_words=config.min_artifact_words)
        if problem:
            raise RuleViolation(
                f"run {packet.id} cannot be marked ready: {problem}",
                hint="write the real content, then mark it ready",
                steps=[step("artifact", packet.id, name=name, why="record it again with",
                            **({"content": artifact.path} if artifact.path else {}))])
