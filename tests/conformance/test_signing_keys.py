"""The signing keys' part of the store contract, on every backend: a key is recorded once,
listed oldest first, retired once (a second retirement keeps the first), never deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from waypost.store import Store
from waypost.store.keys import PublicKey

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _key(n: int, at: datetime) -> PublicKey:
    return PublicKey(keyid=f"{n:064x}", holder=f"holder-{n}", public_key=f"PEM {n}\n",
                     valid_from=at)


def test_a_key_is_recorded_once_listed_oldest_first_and_retired_once(store: Store) -> None:
    later, first = _key(2, T0 + timedelta(days=1)), _key(1, T0)
    assert store.put_key(later) is True
    assert store.put_key(first) is True
    assert store.put_key(first) is False  # the same keyid: nothing written
    assert store.signing_keys() == [first, later]
    retired = store.retire_key(first.keyid, at=T0 + timedelta(days=2))
    assert retired is not None
    assert retired.retired_at == T0 + timedelta(days=2)
    again = store.retire_key(first.keyid, at=T0 + timedelta(days=9))
    assert again is not None
    assert again.retired_at == T0 + timedelta(days=2)
    assert store.retire_key("f" * 64, at=T0) is None
    assert [k.retired_at for k in store.signing_keys()] == [T0 + timedelta(days=2), None]


def test_validity_is_from_its_start_until_its_retirement() -> None:
    key = PublicKey(keyid="0" * 64, holder="h", public_key="", valid_from=T0,
                    retired_at=T0 + timedelta(days=1))
    assert key.valid_at(T0)
    assert key.valid_at(T0 + timedelta(hours=23))
    assert not key.valid_at(T0 + timedelta(days=1))
    assert not key.valid_at(T0 - timedelta(seconds=1))
