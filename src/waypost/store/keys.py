"""The signing keys' part of the store contract: the public half of every key that signs a
run's bundle, with its holder and the time it was valid.

A private key never enters the store (`usecases/keys` keeps it in an owner-only file or an
environment variable). A key is retired, never deleted: a bundle it signed before it was
retired still verifies against the keyring the store exports."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

import msgspec


class PublicKey(msgspec.Struct, frozen=True, kw_only=True):
    """One signing key as the store keeps it (and a keyring file carries it)."""

    keyid: str  # sha256 of the raw Ed25519 public key, in hex
    holder: str  # who signs with it: the store, or an actor
    public_key: str  # PEM (SubjectPublicKeyInfo)
    valid_from: datetime
    retired_at: datetime | None = None  # it signs nothing after; it still verifies before

    def valid_at(self, moment: datetime) -> bool:
        """Whether the key could sign at `moment`: from its start, before its retirement."""
        return self.valid_from <= moment and (self.retired_at is None
                                               or moment < self.retired_at)


class KeyRing(ABC):
    """The public signing keys, the same for every process and host using the store."""

    @abstractmethod
    def put_key(self, key: PublicKey) -> bool:
        """Record a public key; False (and nothing written) when its keyid is already
        recorded."""

    @abstractmethod
    def signing_keys(self) -> list[PublicKey]:
        """Every recorded key, retired ones too, oldest first."""

    @abstractmethod
    def retire_key(self, keyid: str, *, at: datetime) -> PublicKey | None:
        """Retire a key from `at` on (a retired key keeps its first retirement); None when
        no key has that id."""
