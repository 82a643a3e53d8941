"""Reading a file within bounds: only a regular file (a FIFO, a device or a socket would
block or never end), judged again on the opened descriptor (so a swap between the look and
the open cannot fool it), and never more than `limit` bytes, whatever size it reports
(`/proc` files report 0)."""

from __future__ import annotations

import errno
import os
import stat
from typing import Final

from waypost.errors import InvalidInput, NotFound

CHUNK: Final = 1024 * 1024
KINDS: Final = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def read_regular(path: str, *, limit: int, follow: bool = True) -> bytes:
    """The bytes of the regular file at `path`; `follow=False` refuses a symbolic link.
    Raises NotFound, or InvalidInput naming what the path is or that it is too large."""
    _require_regular(_stat(path, follow), path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    try:
        _require_regular(os.fstat(fd), path)
        return _read_at_most(fd, path, limit)
    finally:
        os.close(fd)


def is_plain_file(path: str) -> bool:
    """A regular file, not through a symbolic link (what a walk over a folder reads)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _stat(path: str, follow: bool) -> os.stat_result:
    try:
        return os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        raise _refusal(path, exc) from exc


def _require_regular(found: os.stat_result, path: str) -> None:
    if stat.S_ISREG(found.st_mode):
        return
    what = next((name for test, name in KINDS if test(found.st_mode)), "not a regular file")
    raise InvalidInput(f"{path} is {what}: only regular files are read",
                       hint="name a regular file (or a folder of them)")


def _read_at_most(fd: int, path: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got <= limit:
        chunk = os.read(fd, min(CHUNK, limit + 1 - got))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
    raise InvalidInput(f"{path} is larger than {limit} bytes: too large to read",
                       hint="name a smaller file, or raise [limits] max_artifact_bytes")


def _refusal(path: str, exc: OSError) -> InvalidInput | NotFound:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(f"no file {path}")
    if exc.errno == errno.ELOOP:
        return InvalidInput(f"{path} is a symbolic link: not followed here")
    return InvalidInput(f"cannot read {path}: {exc.strerror}")
