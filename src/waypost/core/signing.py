"""Ed25519 keys and DSSE envelopes: the signature a bundle's statement carries.

The standard library has no Ed25519, so this is waypost's one use of `cryptography`. Only
the bundle's and the keys' verbs import this module; the hot verbs never load it.

A DSSE signature covers the pre-authentication encoding of the payload type and the payload
together (`pae`), never the payload alone, so a signature made for one type of payload can
never be taken for another. A key is named by its keyid: the SHA-256 of its raw 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Final

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from waypost.errors import InvalidInput

PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
MAX_PEM: Final = 4096  # bytes of one key's PEM text


class Signature(msgspec.Struct, frozen=True, kw_only=True):
    keyid: str
    sig: str  # base64 of the 64-byte Ed25519 signature


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A DSSE envelope as JSON: the payload and its signatures, base64 (standard)."""

    payloadType: str  # the DSSE field names
    payload: str
    signatures: tuple[Signature, ...]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: `DSSEv1 LEN(type) type LEN(body) body`, each
    length the ASCII decimal count of bytes, fields separated by one space."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def keyid(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def read_private(pem: bytes, where: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS#8, unencrypted); InvalidInput naming `where`."""
    try:
        key = serialization.load_pem_private_key(pem[: MAX_PEM * 2], password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"{where} holds no readable private key ({exc})",
                           hint="make one with: waypost keys generate") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(f"{where} holds a key that is not Ed25519")
    return key


def read_public(pem: str | bytes, where: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; InvalidInput naming `where`."""
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(data[:MAX_PEM])
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"{where} holds no readable public key ({exc})",
                           hint="export one with: waypost keys export KEYID") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput(f"{where} holds a key that is not Ed25519")
    return key


def sign(payload: bytes, key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE,
         ) -> Envelope:
    """A DSSE envelope of `payload` with one signature by `key`."""
    signature = key.sign(pae(payload_type, payload))
    return Envelope(payloadType=payload_type, payload=base64.b64encode(payload).decode(),
                    signatures=(Signature(keyid=keyid(key.public_key()),
                                          sig=base64.b64encode(signature).decode()),))


def payload_of(envelope: Envelope) -> bytes:
    """The envelope's payload bytes; InvalidInput when they are not base64."""
    return _b64(envelope.payload, "the envelope's payload")


def verifies(envelope: Envelope, signature: Signature, key: Ed25519PublicKey) -> bool:
    """Whether `signature` is `key`'s over the envelope's PAE."""
    try:
        raw = _b64(signature.sig, "a signature")
        key.verify(raw, pae(envelope.payloadType, payload_of(envelope)))
    except (InvalidSignature, InvalidInput):
        return False
    return True


def read_envelope(data: bytes) -> Envelope:
    try:
        return msgspec.json.decode(data, type=Envelope)
    except msgspec.MsgspecError as exc:
        raise InvalidInput(f"not a DSSE envelope ({str(exc)[:200]})") from None


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{what} is not base64") from None


def envelope_json(envelope: Envelope) -> bytes:
    data: dict[str, Any] = msgspec.to_builtins(envelope)
    return msgspec.json.encode(data)
