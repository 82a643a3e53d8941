"""The SHA-256 that chains events: OpenSSL's, or Python's own in a one-shot process.

Its own module, with no imports of waypost's, so that a hot verb's process chooses before
anything hashes, without loading the history (a read verb never does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast


class _Hash(Protocol):
    def hexdigest(self) -> str: ...


Hasher = Callable[[bytes], _Hash]
_sha256: Hasher | None = None  # chosen on first use, or by `prefer_quick_start`


def prefer_quick_start() -> None:
    """Hash with Python's own SHA-256 in this process: OpenSSL's (hashlib) is ~3x faster per
    event, but loading it costs ~3 ms, a twentieth of a one-shot CLI process that hashes one
    event and exits. The digest is the same. A no-op where this Python has no such module."""
    global _sha256  # noqa: PLW0603
    for name in ("_sha2", "_sha256"):  # Python 3.12+, 3.11
        try:
            _sha256 = cast(Hasher, __import__(name).sha256)
            return
        except ImportError:
            pass


def sha256(data: bytes) -> _Hash:
    """SHA-256 of `data`: OpenSSL's unless `prefer_quick_start` chose Python's own."""
    global _sha256  # noqa: PLW0603
    if _sha256 is None:
        from hashlib import sha256 as openssl_sha256

        _sha256 = openssl_sha256
    return _sha256(data)
