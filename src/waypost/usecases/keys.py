"""Signing keys: make one, list, export the public halves, retire one, and load the
private half that signs.

A private key lives in a file only its owner may read (refused when its group or anyone
else may read or write it) or comes from an environment variable, named by the caller; the
store holds the public half alone, with its holder and validity. Retiring a key ends what
it may sign, never what it signed: a keyring carries each key's validity, and a bundle
signed while its key was valid still verifies."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

import msgspec

from waypost.durations import utcnow
from waypost.errors import Conflict, InvalidInput, NotFound, Refused
from waypost.inputs import name
from waypost.store.base import Store
from waypost.store.keys import PublicKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

MAX_KEY_FILE: Final = 16 * 1024  # bytes read of a key file
MAX_KEYRING: Final = 4 * 1024 * 1024  # bytes read of a keyring file
KEYRING_FORMAT: Final = "waypost.keyring/v1"


class Keyring(msgspec.Struct, frozen=True, kw_only=True):
    """The public keys a verifier pins, with the time each was valid."""

    format: str = KEYRING_FORMAT
    keys: tuple[PublicKey, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Signer:
    """A private key ready to sign, and the store's record of its public half."""

    key: Ed25519PrivateKey
    record: PublicKey


def generate(store: Store, *, holder: str, out: str, now: datetime | None = None) -> PublicKey:
    """Make an Ed25519 key: write its private half to `out` (a new file only its owner may
    read), record its public half for `holder`."""
    from waypost.core import signing

    holder = name(holder, "--holder")
    key = signing.new_private_key()
    record = PublicKey(keyid=signing.keyid(key.public_key()), holder=holder,
                       public_key=signing.public_pem(key.public_key()),
                       valid_from=now or utcnow())
    _write_private(out, signing.private_pem(key))
    store.put_key(record)
    return record


def _write_private(path: str, pem: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise Conflict(f"{path} already exists: a key file is never overwritten",
                       hint="name a new file with --out") from None
    except OSError as exc:
        raise InvalidInput(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(pem)


def listed(store: Store) -> list[PublicKey]:
    return store.signing_keys()


def find(store: Store, keyid: str) -> PublicKey:
    """The key `keyid` names (its full id, or a prefix of 8 or more that only it has)."""
    keys = store.signing_keys()
    exact = [k for k in keys if k.keyid == keyid]
    found = exact or ([k for k in keys if k.keyid.startswith(keyid)] if len(keyid) >= 8 else [])
    if len(found) != 1:
        raise NotFound(f"no key {keyid[:64]!r}" if not found
                       else f"{keyid!r} names {len(found)} keys: give more of its id",
                       hint="see the keys with: waypost keys ls")
    return found[0]


def keyring(store: Store) -> Keyring:
    """Every key, retired ones too: a verifier checks each signature against the key's
    validity at the time it signed."""
    return Keyring(keys=tuple(store.signing_keys()))


def retire(store: Store, keyid: str, *, now: datetime | None = None) -> PublicKey:
    key = find(store, keyid)
    retired = store.retire_key(key.keyid, at=now or utcnow())
    if retired is None:
        raise NotFound(f"no key {keyid[:64]!r}")
    return retired


def read_keyring(data: bytes, where: str) -> Keyring:
    if len(data) > MAX_KEYRING:
        raise InvalidInput(f"{where} is larger than {MAX_KEYRING} bytes")
    try:
        ring = msgspec.json.decode(data, type=Keyring)
    except msgspec.MsgspecError as exc:
        raise InvalidInput(f"{where} is not a keyring ({str(exc)[:200]})",
                           hint="write one with: waypost keys export --keyring") from None
    if ring.format != KEYRING_FORMAT:
        raise InvalidInput(f"{where} is a {ring.format[:40]!r}, not a {KEYRING_FORMAT}")
    return ring


def load_signer(store: Store, *, path: str | None, env: str | None,
                now: datetime | None = None) -> Signer:
    """The private key in `path` (owner-only) or in the environment variable `env`, once
    the store records its public half as valid now."""
    from waypost.core import signing

    if (path is None) == (env is None):
        raise InvalidInput("name the signing key once: --key-file FILE or --key-env NAME",
                           hint="make one with: waypost keys generate --holder NAME --out FILE")
    if path is not None:
        key: Ed25519PrivateKey = signing.read_private(read_private_file(path), path)
    else:
        assert env is not None
        text = os.environ.get(env)
        if not text:
            raise InvalidInput(f"the environment variable {env[:64]} is not set")
        key = signing.read_private(text.encode(), f"${env}")
    keyid = signing.keyid(key.public_key())
    record = next((k for k in store.signing_keys() if k.keyid == keyid), None)
    if record is None:
        raise Refused(f"key {keyid[:16]} is not one of this store's signing keys",
                      hint="make one with: waypost keys generate --holder NAME --out FILE")
    if not record.valid_at(now or utcnow()):
        raise Refused(f"key {keyid[:16]} ({record.holder}) was retired at "
                      f"{record.retired_at}: it signs nothing after",
                      hint="make a new one with: waypost keys generate")
    return Signer(key=key, record=record)


def read_private_file(path: str) -> bytes:
    """A private key file's bytes, refused when anyone but its owner may read or write it
    (checked on the file opened, so it cannot be swapped between the check and the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise InvalidInput(f"cannot open the key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if mode & 0o077:
            raise Refused(f"the key file {path} may be read or written by others "
                          f"(mode {mode & 0o777:o}): a private key is its owner's alone",
                          hint=f"chmod 600 {path}")
        return file.read(MAX_KEY_FILE)
