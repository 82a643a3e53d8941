"""Scanning files on disk for private identifiers (`waypost scan`, the grep check's
folders): the reading part, over the pure rules of `waypost.core.sanitize`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from waypost.core.sanitize import Finding, scan_bytes

SKIP_DIRS: Final = frozenset({".git", ".hg", ".svn", ".waypost", ".venv", "venv",
                              "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"})


def iter_files(paths: Iterable[str]) -> Iterator[Path]:
    """The files named, and every file under the directories named (VCS and caches skipped)."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                yield from (Path(root) / f for f in sorted(files))
        else:
            yield path


def scan_paths(paths: Iterable[str], *, deny: Sequence[str] = (),
               allow: Sequence[str] = ()) -> tuple[list[Finding], int]:
    """Findings in every readable text file under `paths`; returns (findings, files scanned)."""
    findings: list[Finding] = []
    scanned = 0
    for path in iter_files(paths):
        data = path.read_bytes()  # a missing path raises FileNotFoundError for the caller
        scanned += 1
        findings += scan_bytes(data, str(path), deny=deny, allow=allow)
    return findings, scanned


