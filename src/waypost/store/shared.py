"""What both backends share.

Limits: how long a write waits for another's lock, which waypost may write to a schema
newer than it knows, and what a store-level setting may be.

Rows: reading stored rows so that one bad row never hides the others: a packet that does
not decode is an IntegrityError naming its run when read alone, and is left out of a list
(`ls`, the watchdog's sweep, `doctor`) and named there (`Skipped`).

Tokens: a token id is stored once (`token_taken` refuses another).

Overlap: work a caller hands a commit to run beside its flush (`Meanwhile`)."""

from __future__ import annotations

import math
import os
from _thread import LockType, allocate_lock, start_new_thread  # no `threading` to import
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from waypost.core.writes import Due
from waypost.errors import Conflict, IntegrityError, InvalidInput, Refused
from waypost.model import Origin, Packet, json_decoder

DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a write waits for another writer's lock: then StoreBusy
MAX_BUSY_TIMEOUT = 3600.0
BUSY_TIMEOUT_ENV = "WAYPOST_BUSY_TIMEOUT"


def busy_timeout(seconds: float | None = None) -> float:
    """How long a write waits for the store's lock in all, then fails with StoreBusy:
    `seconds`, else `WAYPOST_BUSY_TIMEOUT` (seconds, or a duration such as 500ms or 2m),
    else 30 s."""
    said = f"busy timeout {seconds!r}"
    if seconds is None:
        text = os.environ.get(BUSY_TIMEOUT_ENV)
        if not text:
            return DEFAULT_BUSY_TIMEOUT
        said = f"{BUSY_TIMEOUT_ENV}={text[:40]!r}"
        seconds = _seconds(text.strip().lower())
    if not 0 <= seconds <= MAX_BUSY_TIMEOUT:  # NaN fails both
        raise InvalidInput(f"bad store {said}: want 0 to {MAX_BUSY_TIMEOUT:g} seconds",
                           hint=f"set {BUSY_TIMEOUT_ENV} to e.g. 30s, 500ms or 2m")
    return seconds


def _seconds(text: str) -> float:
    """A duration's seconds (durations have no unit below the second: ms is read here);
    NaN for what is none."""
    from waypost.durations import parse_duration

    try:
        return float(text[:-2]) / 1000 if text.endswith("ms") else parse_duration(text)
    except (InvalidInput, ValueError):
        return math.nan


MIN_WRITER = "min_writer_version"  # the `meta` row: the oldest schema a writer may know
SETTING_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
MAX_SETTING_NAME = 64
MAX_SETTING_VALUE = 4096


def write_refusal(where: str, version: int, latest: int, min_writer: str | None) -> Refused | None:
    """The error every write to a store at schema `version` gets from a waypost that knows
    schema `latest`, or None when it may write. A newer schema says in `min_writer` (its
    `meta` row) the oldest schema whose writers it still takes; one that says nothing is
    taken as needing its own."""
    if version <= latest:
        return None
    try:
        needed = int(min_writer) if min_writer is not None else version
    except ValueError:
        needed = version
    if needed <= latest:
        return None
    return Refused(
        f"the store at {where} has schema version {version} and takes writes only from a "
        f"waypost that knows schema {needed} or newer; this waypost knows schema {latest}: "
        "it may read this store, not write to it",
        hint="upgrade waypost on this host (pip install -U waypost)")


def head_changed(run_id: str, seq: int) -> IntegrityError:
    """A write refused at commit because the run's head event is no longer stored as the
    writer read it (or wrote it): it was altered behind the writer's back."""
    return IntegrityError(
        f"run {run_id}: its head event (seq {seq}) was altered since this writer read it: "
        "its history was altered or damaged, so nothing is written to it",
        hint=f"see the damage with: waypost verify {run_id}; restore the store from a "
        "backup (waypost doctor checks every run)")


def token_taken(token_id: str) -> Conflict:
    """A token stored under an id another token has: refused, nothing stored (a token
    made from a used link's nonce is refused so: `usecases.links`)."""
    return Conflict(f"a token with the id {token_id} exists already",
                    hint="a token id is used once")


def check_setting(name: str, value: str | None) -> None:
    """Refuse a setting's name or value that is malformed or too long."""
    if not name or len(name) > MAX_SETTING_NAME or not set(name) <= SETTING_NAME_CHARS:
        raise InvalidInput(f"bad setting name {name[:80]!r}",
                           hint=f"use at most {MAX_SETTING_NAME} of a-z, 0-9, _ . and -, "
                           "e.g. limits.title")
    if value is not None and (len(value) > MAX_SETTING_VALUE or "\x00" in value):
        raise InvalidInput(f"bad value for setting {name}: at most {MAX_SETTING_VALUE} "
                           "characters, no NUL")


def stop_turn_setting(run_id: str) -> str:
    """The setting that holds the turn of the stop hook's last counted refusal of a run:
    named after the run (a digest of its id, should the id not fit a setting's name)."""
    name = "hook.turn." + run_id.lower()
    if len(name) <= MAX_SETTING_NAME and set(name) <= SETTING_NAME_CHARS:
        return name
    import hashlib  # here: a run id waypost made always fits

    return "hook.turn." + hashlib.sha256(run_id.encode()).hexdigest()[:40]


# --- rows -------------------------------------------------------------------------------


class Skipped(msgspec.Struct, frozen=True, kw_only=True):
    """A stored row a list read left out because it could not be read."""

    run_id: str
    reason: str


def inbox_rows(rows: Iterable[tuple[str, int, Any, int]]) -> list[tuple[Any, int]]:
    """(run id, seq, event JSON, shown mark) rows as (Event, shown mark): an inbox's read."""
    from waypost.events import Event  # here: only an inbox reads events this way
    from waypost.model import json_decoder

    decoder, found = json_decoder(Event), []
    for run_id, seq, body, shown in rows:
        try:
            found.append((decoder.decode(body), int(shown)))
        except msgspec.MsgspecError as exc:
            raise IntegrityError(f"run {run_id} seq {seq}: unreadable event: {exc}") from exc
    return found


def decode_packet(decoder: msgspec.json.Decoder[Packet], run_id: str,
                  body: bytes | str) -> Packet:
    """A stored packet; IntegrityError naming the run when it does not decode."""
    try:
        return decoder.decode(body)
    except msgspec.MsgspecError as exc:
        raise IntegrityError(
            f"run {run_id}: its stored packet does not read: {exc}",
            hint=f"check its history with: waypost verify {run_id}; the other runs are "
            "unaffected (waypost ls names every run it has to skip)") from exc


def origin_of(text: bytes | str) -> Origin:
    """An imported run's stored origin (`model.Origin`)."""
    return json_decoder(Origin).decode(text)


def readable_packets(decoder: msgspec.json.Decoder[Packet],
                     rows: Iterable[Sequence[Any]],
                     skipped: list[Skipped] | None) -> list[Packet]:
    """The packets of rows (run id, packet JSON) that decode: a row that does not is left
    out, and noted in `skipped` when given, so one bad row never hides the others."""
    packets = []
    for run_id, body in rows:
        try:
            packets.append(decoder.decode(body))
        except msgspec.MsgspecError as exc:
            if skipped is not None:
                skipped.append(Skipped(run_id=run_id, reason=f"unreadable packet: {exc}"))
    return packets


# run id, packet JSON, head hash, due at, head event JSON (None: missing)
DueRow = tuple[str, bytes | str, str, datetime, bytes | str | None]


def due_page(fetch: Callable[[tuple[datetime, str] | None, int], list[DueRow]],
             decoder: msgspec.json.Decoder[Packet], *, after: tuple[datetime, str] | None,
             limit: int, skipped: list[Skipped] | None) -> list[Due]:
    """A page of `limit` due runs read with `fetch(after, limit)`, filled past the rows
    that do not decode (each noted in `skipped`), so that a short page still means the
    last one. Every fetch reads on past the rows before it: the loop is bounded."""
    page: list[Due] = []
    while True:
        wanted = limit - len(page)
        rows = fetch(after, wanted)
        for run_id, body, head, due_at, event in rows:
            try:
                page.append(Due(decoder.decode(body), head, due_at, event))
            except msgspec.MsgspecError as exc:
                if skipped is not None:
                    skipped.append(Skipped(run_id=run_id, reason=f"unreadable packet: {exc}"))
        if len(rows) < wanted or len(page) >= limit:
            return page
        after = (rows[-1][3], rows[-1][0])


class Meanwhile:
    """Work a store runs beside a commit's flush: Python work and the flush, which holds no
    interpreter lock, then use both cores. `start` it at the end of the transaction's
    statements, inside a `with` around the transaction: leaving the `with` waits for the
    work and raises what it raised, unless the transaction's own error is on its way (that
    one wins). With no work, it does nothing; where no thread can be started, the work is
    done on leaving, on the caller's thread.

        with Meanwhile(meanwhile) as aside, transaction():
            ...  # the statements
            aside.start()

    The thread is started bare (`_thread`), not as a `threading.Thread`, whose `start`
    waits until the new thread runs: that thread then holds the interpreter lock, and the
    caller's COMMIT could not begin until the interpreter's switch interval (5 ms) took
    the lock back from it, on every page. Started bare, the caller goes on into its COMMIT
    and the work takes the lock once the COMMIT lets it go."""

    def __init__(self, work: Callable[[], None] | None) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._done: LockType | None = None  # held while the work runs on its thread

    def start(self) -> None:
        if self._work is None:
            return
        done = allocate_lock()
        done.acquire()
        try:
            start_new_thread(self._aside, (done,))
        except RuntimeError:  # no thread to be had: the work waits for the `with`'s end
            return
        self._done = done

    def _aside(self, done: LockType) -> None:
        try:
            self._run()
        finally:
            done.release()

    def _run(self) -> None:
        work, self._work = self._work, None
        try:
            if work is not None:
                work()
        except BaseException as exc:  # raised on the caller's thread, leaving the `with`
            self._error = exc

    def __enter__(self) -> Meanwhile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if self._done is not None:
            self._done.acquire()  # the work has ended
        elif exc is None:
            self._run()  # started without a thread (or not at all, the commit having ended)
        if self._error is not None and exc is None:
            raise self._error
