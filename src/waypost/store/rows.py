"""Reading stored rows so that one bad row never hides the others: a packet that does not
decode is an IntegrityError naming its run when read alone, and is left out of a list
(`ls`, the watchdog's sweep, `doctor`) and named there (`Skipped`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from waypost.core.writes import Due
from waypost.errors import IntegrityError
from waypost.model import Packet


class Skipped(msgspec.Struct, frozen=True, kw_only=True):
    """A stored row a list read left out because it could not be read."""

    run_id: str
    reason: str


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


DueRow = tuple[str, bytes | str, str, datetime]  # run id, packet JSON, head hash, due at


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
        for run_id, body, head, due_at in rows:
            try:
                page.append(Due(decoder.decode(body), head, due_at))
            except msgspec.MsgspecError as exc:
                if skipped is not None:
                    skipped.append(Skipped(run_id=run_id, reason=f"unreadable packet: {exc}"))
        if len(rows) < wanted or len(page) >= limit:
            return page
        after = (rows[-1][3], rows[-1][0])
