"""Scanning files on disk for private identifiers (`waypost scan`, the grep check's
folders): the reading part, over the pure rules of `waypost.core.sanitize`.

Only regular files are read, each up to a size limit (a FIFO, a device or `/dev/zero` is
refused by name, never read). Inside a folder, symbolic links are not followed (they could
lead out of it or to a device) and entries that are not regular files are passed over."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from waypost.config import Config
from waypost.core.sanitize import Finding, scan_bytes
from waypost.system.files import is_plain_file, read_regular

SKIP_DIRS: Final = frozenset({".git", ".hg", ".svn", ".waypost", ".venv", "venv",
                              "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"})
READ_LIMIT: Final = Config().max_artifact_bytes  # the largest file read, as for an artifact


def iter_files(paths: Iterable[str]) -> Iterator[tuple[Path, bool]]:
    """The paths named, and every regular file under the folders named (VCS and caches
    skipped; links not followed); each with True when it was found inside a folder."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                found = (Path(root) / f for f in sorted(files))
                yield from ((p, True) for p in found if is_plain_file(str(p)))
        else:
            yield path, False


def read_files(paths: Iterable[str], *, limit: int = READ_LIMIT) -> Iterator[tuple[Path, bytes]]:
    """Each file of `iter_files` with its bytes. A path named that is missing, not a
    regular file or larger than `limit` raises NotFound or InvalidInput naming it."""
    for path, inside in iter_files(paths):
        yield path, read_regular(str(path), limit=limit, follow=not inside)


def scan_paths(paths: Iterable[str], *, deny: Sequence[str] = (), allow: Sequence[str] = (),
               limit: int = READ_LIMIT) -> tuple[list[Finding], int]:
    """Findings in every readable text file under `paths`; returns (findings, files scanned)."""
    findings: list[Finding] = []
    scanned = 0
    for path, data in read_files(paths, limit=limit):
        scanned += 1
        findings += scan_bytes(data, str(path), deny=deny, allow=allow)
    return findings, scanned
