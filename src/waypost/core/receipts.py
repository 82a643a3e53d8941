"""What a sent delivery's receipt says, as stored in the outbox row's `receipt` text.

A receipt written now is a small JSON object: what the target said (`said`), how strong
"once" was (`assurance`, `waypost.model.DeliveryAssurance`) and the references a later
delivery needs (`refs`: a Slack message's `channel` and `ts`, a GitHub comment's `id`). A
receipt written before receipts said this is plain text: it still reads, as what the
target said, with no assurance and no references.
"""

from __future__ import annotations

import msgspec

from waypost.model import DeliveryAssurance


class SentReceipt(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    said: str  # what the target said when it accepted, e.g. "HTTP 204" or "posted ts=…"
    assurance: DeliveryAssurance | None = None  # None: an older, plain-text receipt
    refs: dict[str, str] = {}  # what a later delivery of the run may build on


_decoder = msgspec.json.Decoder(SentReceipt)
_encoder = msgspec.json.Encoder()


def encode(receipt: SentReceipt) -> str:
    """The receipt as stored; one that says nothing beyond the text is stored as the text."""
    if receipt.assurance is None and not receipt.refs:
        return receipt.said
    return _encoder.encode(receipt).decode()


def read(text: str | None) -> SentReceipt | None:
    """The stored receipt `text` (None: none stored); plain text reads as what was said."""
    if text is None:
        return None
    if text.startswith("{"):
        try:
            return _decoder.decode(text)
        except msgspec.DecodeError:
            pass  # not one of ours: a plain-text receipt that happens to start with {
    return SentReceipt(said=text)


def shown(text: str | None) -> str:
    """One line for `show`: what was said, then the assurance (`[upsert]`) when known."""
    receipt = read(text)
    if receipt is None:
        return ""
    return f"{receipt.said} [{receipt.assurance}]" if receipt.assurance else receipt.said
