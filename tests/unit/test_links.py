"""The signed email link, read back: only this secret's, unchanged, before its expiry; the
same delivery always makes the same link; nothing in a token is believed before its
signature is."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from waypost.core import links
from waypost.errors import InvalidInput, NotAuthorized

SECRET = "s" * 40
NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


def _link(key: str = "wp_01.7.ready_for_review", owner: str = "alice") -> links.Link:
    return links.link_for(run="wp_01", owner=owner, delivery_key=key,
                          expires_at=NOW + timedelta(days=7))


def test_a_link_reads_back_as_made_until_it_expires() -> None:
    link = _link()
    token = links.make(link, SECRET)
    assert token.startswith("wl1.")
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert links.read(token, SECRET, now=NOW) == link
    assert links.read(token, SECRET, now=NOW + timedelta(days=7, seconds=-1)) == link
    with pytest.raises(NotAuthorized, match="expired at 2026-12-12 03:00Z"):
        links.read(token, SECRET, now=NOW + timedelta(days=7))


def test_the_same_delivery_makes_the_same_link_and_another_delivery_another() -> None:
    assert links.make(_link(), SECRET) == links.make(_link(), SECRET)
    other = _link("wp_01.9.ready_for_review")
    assert other.nonce != _link().nonce
    assert links.make(other, SECRET) != links.make(_link(), SECRET)


def _payload(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    decoded: dict[str, object] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def _with_payload(token: str, payload: dict[str, object]) -> str:
    part = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    version, _, signature = token.split(".")
    return f"{version}.{part}.{signature}"


@pytest.mark.parametrize("change", ["run", "owner", "expires", "signature", "secret",
                                    "version", "cut", "padded"])
def test_a_changed_or_foreign_token_is_refused(change: str) -> None:
    token = links.make(_link(), SECRET)
    payload = _payload(token)
    tampered = {
        "run": lambda: _with_payload(token, {**payload, "run": "wp_02"}),
        "owner": lambda: _with_payload(token, {**payload, "owner": "mallory"}),
        "expires": lambda: _with_payload(token, {**payload, "expires": 4 * 10**9}),
        "signature": lambda: token[:-2] + ("AA" if token[-2:] != "AA" else "BB"),
        "secret": lambda: links.make(_link(), "t" * 40),
        "version": lambda: "wl2" + token[3:],
        "cut": lambda: token.rsplit(".", 1)[0],
        "padded": lambda: token + "=",
    }[change]()
    with pytest.raises(NotAuthorized, match="not one this server signed"):
        links.read(tampered, SECRET, now=NOW)


@pytest.mark.parametrize("token", ["", "wl1", "wl1..", "wl1.e30.", "wl1.%%%.x", "x" * 5000,
                                   "wl1.bm90IGpzb24.AAAA", "wl1.é.x"])
def test_malformed_tokens_are_refused_without_a_crash(token: str) -> None:
    with pytest.raises(NotAuthorized):
        links.read(token, SECRET, now=NOW)


def test_a_signed_payload_of_the_wrong_shape_is_refused() -> None:
    """Defence in depth: even a payload this secret signed must be a link's shape."""
    shaped = {"run": "wp_01", "owner": "a", "expires": 1, "nonce": "0" * 32}
    for payload in ({"run": "wp_01"}, {**shaped, "run": "../x"}, {**shaped, "more": 1}):
        signed = "wl1." + base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(
            b"=").decode()
        token = f"{signed}.{links._b64(links._mac(SECRET, signed))}"
        with pytest.raises(NotAuthorized, match="not one this server signed"):
            links.read(token, SECRET, now=NOW)


def test_a_short_secret_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match="WAYPOST_LINK_SECRET must be at least 32"):
        links.check_secret("short")
    assert links.check_secret(SECRET) == SECRET
