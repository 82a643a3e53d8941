"""Recording artifacts: files are copied into the store's content-addressed blob area, so
the parent can fetch them after the worker's machine is gone; URLs are references.

Both edges treat their input as hostile. `add` decides the name, the file (a regular file,
opened once, read in bounded chunks however large it says it is) and the run's rules before a
byte is stored; bytes sent from elsewhere (an upload, inline content, a program's output:
`Run.add_artifact_bytes`) are decided the same way, then counted as they come. `get` writes
only regular files, never through a link, a device or a FIFO, never over an existing file
unless forced, and leaves no temporary file behind on failure.
"""

from __future__ import annotations

import errno
import hashlib
import mimetypes
import os
import re
import secrets
import shlex
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from waypost.errors import (
    Conflict,
    DiskFull,
    IntegrityError,
    InvalidInput,
    NotFound,
    TooLarge,
    WaypostError,
)
from waypost.model import Artifact, ArtifactRole
from waypost.store.base import Store

# A plain file name: not hidden (no leading "."), not an option (no leading "-"), no
# separators, no trailing space. Names recorded under older rules may break this; they stay
# readable, but are never written under their own name (see `fetch_command`).
_NAME = re.compile(r"[A-Za-z0-9_+@][A-Za-z0-9 ._+@-]{0,199}")
_NAME_HELP = ("use a plain file name: letters, digits and . _ - + @ (spaces inside), "
              "not starting with . or -")
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._+@-]")
_CHUNK = 1 << 20  # bytes read at a time from an artifact's source


def check_name(name: str) -> str:
    """An artifact name is a plain file name that is safe to write in any directory."""
    if not _NAME.fullmatch(name) or name.endswith(" "):
        why = ("is hidden" if name.startswith(".") else
               "looks like an option" if name.startswith("-") else "is not a plain file name")
        raise InvalidInput(f"bad artifact name {name!r}: it {why}; {_NAME_HELP}",
                           hint=f"pass --name {shlex.quote(safe_name(name))}")
    return name


def safe_name(name: str) -> str:
    """A name that passes `check_name`, derived from `name` (for names recorded under older
    rules, and for hints)."""
    plain = _UNSAFE.sub("_", name).lstrip(".- ").rstrip(" ")[:200]
    return plain if _NAME.fullmatch(plain) else "artifact"


def fetch_command(run_id: str, name: str) -> str:
    """The shell command that fetches a stored artifact, quoted for a POSIX shell. A name
    recorded under older rules (hidden, or option-like) gets an explicit, safe `-o`."""
    argv = ["waypost", "artifact", "get", run_id]
    try:
        check_name(name)
    except InvalidInput:
        argv += ["-o", safe_name(name), "--"]
    return shlex.join([*argv, name])


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


# --- add: decide, then store ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Source:
    """An artifact's source, decided (name, kind of file, reported size) but not read.
    `record` is complete for a URL; a file's gains its digest and size in `read_and_store`."""

    record: Artifact
    fd: int | None = None  # the opened regular file


@contextmanager
def open_source(source: str, *, role: ArtifactRole, name: str | None, max_bytes: int,
                at: datetime, by: str) -> Iterator[Source]:
    """Decide everything about `source` that needs no store: the name, that a file is a
    readable regular file (opened once; FIFOs and devices are refused, never waited on), and
    its reported size against `max_bytes`."""
    if is_url(source):
        yield Source(record=_url_record(source, role=role, name=name, at=at, by=by))
        return
    label = check_name(name if name is not None else Path(source).name)
    fd = _open_regular(source)
    try:
        reported = os.fstat(fd).st_size
        if reported > max_bytes:
            raise _too_big(source, max_bytes, f"is {reported} bytes")
        yield Source(fd=fd, record=Artifact(
            name=label, role=role, path=source, media_type=_media_type(label), stored=True,
            recorded_at=at, recorded_by=by))
    finally:
        os.close(fd)


def sent_record(name: str, *, role: ArtifactRole, at: datetime, by: str,
                media_type: str | None = None, size: int | None = None,
                max_bytes: int) -> Artifact:
    """The record of bytes sent from elsewhere, decided before they are read: the name, the
    media type, and the size the sender declared (if any) against `max_bytes`. No path, so
    nothing on this machine's disk is ever compared with it. Its digest and size are added
    once the bytes are stored (`store_chunks`)."""
    label = check_name(name)
    if size is not None and size > max_bytes:
        raise _too_big(f"artifact {label!r}", max_bytes, f"is {size} bytes")
    return Artifact(name=label, role=role, stored=True, recorded_at=at, recorded_by=by,
                    media_type=_media_type(label) if media_type is None
                    else _checked_media_type(media_type))


def store_chunks(store: Store, record: Artifact, chunks: Iterable[bytes],
                 max_bytes: int) -> Artifact:
    """The chunks counted as they come (refused past `max_bytes`, whatever was declared),
    then stored as one blob: `record` with its digest and size. Call only once the run's
    rules have been checked: storing is the step that leaves a trace."""
    data = _gathered(chunks, max_bytes, f"artifact {record.name!r}")
    digest = store.put_blob(data)
    return msgspec.structs.replace(record, sha256=digest, bytes=len(data))


def read_and_store(store: Store, source: Source, max_bytes: int) -> Artifact:
    """Read the decided file, counting bytes (its reported size is not trusted: /proc files
    say 0), refuse it past `max_bytes`, then store it as a blob. Call only once the run's
    rules have been checked: storing is the step that leaves a trace."""
    if source.fd is None:
        return source.record
    data = _gathered(_file_chunks(source.fd, max_bytes, source.record.path or ""), max_bytes,
                     source.record.path or "")
    digest = store.put_blob(data)
    return msgspec.structs.replace(source.record, sha256=digest, bytes=len(data))


def _url_record(source: str, *, role: ArtifactRole, name: str | None, at: datetime,
                by: str) -> Artifact:
    if any(c.isspace() or not c.isprintable() for c in source):
        raise InvalidInput(f"bad artifact URL {source!r}: it contains spaces or control "
                           "characters", hint="percent-encode them (%20)")
    label = check_name(name if name is not None
                       else source.rstrip("/").rsplit("/", 1)[-1] or "link")
    return Artifact(name=label, role=role, url=source, media_type=_media_type(label),
                    recorded_at=at, recorded_by=by)


def _open_regular(source: str) -> int:
    """`source` opened for reading, if it is a regular file: a device is not even opened
    (opening some has effects), and O_NONBLOCK keeps a FIFO that replaced the file meanwhile
    from waiting for a writer; the opened file must be the one that was looked at."""
    try:
        seen = os.stat(source)
        _require_regular(source, seen.st_mode)
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise NotFound(f"no file {source}",
                       hint="check the path, or pass an http(s) URL") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror}",
                           hint="pass a regular file you can read") from exc
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
        os.close(fd)
        raise Conflict(f"{source} was replaced while it was being opened; nothing was stored",
                       hint="try again once nothing else writes it")
    os.set_blocking(fd, True)
    return fd


def _require_regular(source: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise InvalidInput(f"{source} is {_kind(mode)}, not a regular file: only files are "
                           "recorded", hint="copy what you want to record into a file first")


def _file_chunks(fd: int, max_bytes: int, source: str) -> Iterator[bytes]:
    """The file's bytes, a bounded chunk at a time, never more than one past `max_bytes`."""
    total = 0
    while total <= max_bytes:
        try:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        except OSError as exc:
            raise InvalidInput(f"cannot read {source}: {exc.strerror}") from exc
        if not chunk:
            return
        total += len(chunk)
        yield chunk


def _gathered(chunks: Iterable[bytes], max_bytes: int, source: str) -> bytes:
    """Every chunk, counted as it comes: refused as soon as the count passes `max_bytes`."""
    kept: list[bytes] = []
    total = 0
    for chunk in chunks:
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise InvalidInput(f"{source}: a chunk of {type(chunk).__name__}, not bytes",
                               hint="pass bytes (encode text first: text.encode())")
        piece = bytes(chunk)
        total += len(piece)
        if total > max_bytes:
            raise _too_big(source, max_bytes, f"has more than {max_bytes} bytes")
        kept.append(piece)
    return b"".join(kept)


def _too_big(source: str, max_bytes: int, how: str) -> TooLarge:
    return TooLarge(
        f"{source} {how}, above the artifact limit of {max_bytes} bytes; nothing was stored",
        hint="raise [limits] max_artifact_bytes in waypost.toml, or record a URL instead")


_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/"
                         r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")


def _checked_media_type(media_type: str) -> str:
    if not _MEDIA_TYPE.fullmatch(media_type):
        raise InvalidInput(f"bad media type {media_type[:80]!r}: write TYPE/SUBTYPE",
                           hint="e.g. text/markdown, or leave it out to guess from the name")
    return media_type.lower()


# --- get: fetch and write out ---------------------------------------------------------


def fetch(store: Store, run_id: str, name: str) -> tuple[Artifact, bytes]:
    """The artifact's stored bytes, checked against the recorded sha256."""
    packet = store.get(run_id)
    artifact = packet.artifact(name)
    if artifact is None:
        names = ", ".join(repr(a.name) for a in packet.artifacts) or "none"
        raise NotFound(f"run {packet.id} has no artifact {name!r} (recorded: {names})")
    if not artifact.stored or artifact.sha256 is None:
        raise NotFound(f"artifact {name!r} of {packet.id} is a reference, not stored: "
                       f"{artifact.url or artifact.path}")
    data = store.get_blob(artifact.sha256)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise IntegrityError(f"blob of artifact {name!r} does not match its sha256")
    return artifact, data


def destination(name: str, output: str | None, *, run_id: str, force: bool = False) -> Path:
    """Where `artifact get` writes: `output` (a file, or a directory to put `name` in;
    default: `name` in the current directory), decided before any byte is read. Only a
    regular file is ever written; an existing one only with `force`."""
    target = _target(name, output, run_id)
    _check_replaceable(target, force)
    return target


def write_out(data: bytes, target: Path, *, force: bool = False) -> Path:
    """Write `data` to `target` (from `destination`), atomically: a temporary file made
    exclusively beside it, then renamed over it; the target is checked again just before."""
    _check_replaceable(target, force)
    tmp = _write_temp(target, data)
    try:
        _install(tmp, target, force)
    finally:
        _remove(tmp)
    _sync_dir(target.parent)
    return target


def _target(name: str, output: str | None, run_id: str) -> Path:
    if output == "":
        raise InvalidInput("-o needs a path", hint="pass -o FILE, -o DIR, or -o - for stdout")
    if output is None:
        try:
            here = Path.cwd()
        except FileNotFoundError:
            raise NotFound("the current directory no longer exists",
                           hint="cd to a directory, or pass -o PATH") from None
        return here / _own_name(name, "the current directory", run_id)
    path = Path(output)
    if path.is_dir():
        return path / _own_name(name, output, run_id)
    if output.endswith(os.sep):  # meant as a directory: never a file named like it
        raise NotFound(f"no directory {output}",
                       hint=f"create it first: mkdir -p {shlex.quote(output)}")
    return path


def _own_name(name: str, where: str, run_id: str) -> str:
    """`name` as a file name in `where`: a name recorded under older rules (`.bashrc`)
    would replace a hidden file there, so it is refused and a safe `-o` suggested."""
    try:
        return check_name(name)
    except InvalidInput:
        raise InvalidInput(
            f"artifact {name!r} has a hidden or option-like name (recorded under older "
            f"rules): it is not written under that name into {where}",
            hint=f"name the output: {fetch_command(run_id, name)}") from None


def _check_replaceable(target: Path, force: bool) -> None:
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        _check_parent(target)
        return
    except OSError as exc:
        raise _write_error(exc, target) from exc
    if not stat.S_ISREG(mode):
        hint = ("pass -o the file the link points to, or another path" if stat.S_ISLNK(mode)
                else "to stream the bytes, pass -o -")
        raise InvalidInput(f"{target} is {_kind(mode)}, not a regular file: waypost writes "
                           "only regular files, never through a link", hint=hint)
    if not force:
        raise Conflict(f"{target} exists; nothing was written",
                       hint="pass --force to replace it, or -o another path")


def _check_parent(target: Path) -> None:
    parent = target.parent
    try:
        mode = os.stat(parent).st_mode
    except FileNotFoundError:
        raise NotFound(f"no directory {parent} to write {target.name} in",
                       hint=f"create it first: mkdir -p {shlex.quote(str(parent))}") from None
    except OSError as exc:
        raise _write_error(exc, parent) from exc
    if not stat.S_ISDIR(mode):
        raise InvalidInput(f"{parent} is not a directory", hint="pass -o another path")


def _write_temp(target: Path, data: bytes) -> Path:
    """A new file beside `target` holding `data`, made exclusively (never an existing file,
    never through a link); removed again if anything fails."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(8):  # a random name is taken only by accident or by malice
        tmp = target.with_name(f".{target.name[:100]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as for any new file
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise _write_error(exc, target) from exc
    else:
        raise WaypostError(f"cannot make a temporary file beside {target}")
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError):
            raise _write_error(exc, target) from exc
        raise
    return tmp


def _install(tmp: Path, target: Path, force: bool) -> None:
    """Put `tmp` in place. rename() replaces a link that appeared meanwhile rather than
    following it; without `force`, link() refuses anything that appeared at all."""
    try:
        if force:
            _check_replaceable(target, force=True)
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)
        except FileExistsError:
            _check_replaceable(target, force=False)
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                raise
            _check_replaceable(target, force=False)  # no hard links here: check, then rename
            os.rename(tmp, target)
    except OSError as exc:
        raise _write_error(exc, target) from exc


def _remove(tmp: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(tmp)


def _sync_dir(directory: Path) -> None:
    """Make the rename durable; a directory that cannot be opened or synced is no error
    (the file itself was synced)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_ENVIRONMENT = (errno.ENOSPC, errno.EDQUOT, errno.EIO)  # not the path's fault: the machine's


def _write_error(exc: OSError, path: Path) -> WaypostError:
    """An OSError while writing `path`, as an error the user can act on."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"disk full: cannot write {path}; nothing was written",
                            hint="free some space there, or pass -o a path on another disk")
    if exc.errno in _ENVIRONMENT:
        return WaypostError(f"cannot write {path}: {exc.strerror}")
    return InvalidInput(f"cannot write {path}: {exc.strerror or exc}",
                        hint="pass -o a path you can write, or -o - for stdout")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
    return next((label for test, label in kinds if test(mode)), "not a regular file")


def _media_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed is None and name.endswith(".md"):
        return "text/markdown"
    return guessed or "application/octet-stream"
