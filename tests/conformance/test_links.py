"""An emailed link used on every backend: it signs its owner in to its run once; a second
use, even at the same instant from another thread, is refused with nothing stored; an
expired or changed link stores nothing; signing out ends a link's session alone."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.helpers import FakeClock
from waypost.core import links as signed
from waypost.errors import Conflict, NotAuthorized, NotFound, Unauthenticated
from waypost.model import Grant, Role
from waypost.store import Store
from waypost.usecases import links, starting, tokens

SECRET = "k" * 48


def _token(run: str, clock: FakeClock, *, owner: str = "alice", key: str = "d1",
           days: float = 7) -> str:
    link = signed.link_for(run=run, owner=owner, delivery_key=key,
                           expires_at=clock.now + timedelta(days=days))
    return signed.make(link, SECRET)


def _run(store: Store) -> str:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:")
    return run.id


def test_a_link_signs_its_owner_in_to_its_run_once(store: Store, clock: FakeClock) -> None:
    run = _run(store)
    token = _token(run, clock)
    secret, grant = links.use(store, token, secret=SECRET, now=clock.now)
    assert (grant.holder, grant.role, grant.run_id) == ("alice", Role.OWNER, run)
    assert grant.expires_at == clock.now + links.SESSION
    assert tokens.authenticate(store, secret, now=clock.now) == grant
    before = store.grants()
    clock.advance(5)
    with pytest.raises(Conflict, match="already used"):
        links.use(store, token, secret=SECRET, now=clock.now)
    assert store.grants() == before
    other_mail = _token(run, clock, key="d2")  # another mail's link is a link of its own
    assert links.use(store, other_mail, secret=SECRET, now=clock.now)[1].id != grant.id


def test_two_uses_at_once_sign_in_exactly_one(store: Store, clock: FakeClock) -> None:
    run = _run(store)
    token = _token(run, clock)
    won: list[Grant] = []
    lost: list[Exception] = []
    start = threading.Barrier(4)

    def use() -> None:
        start.wait(10)
        try:
            won.append(links.use(store, token, secret=SECRET, now=clock.now)[1])
        except Conflict as exc:
            lost.append(exc)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert (len(won), len(lost)) == (1, 3)
    assert [g.id for g in store.grants()] == [won[0].id]


def test_a_late_changed_or_misdirected_link_stores_nothing(store: Store,
                                                           clock: FakeClock) -> None:
    run = _run(store)
    late = _token(run, clock, days=1)
    clock.advance(86400)
    with pytest.raises(NotAuthorized, match="expired"):
        links.use(store, late, secret=SECRET, now=clock.now)
    with pytest.raises(NotAuthorized, match="not one this server signed"):
        links.use(store, _token(run, clock)[:-3] + "xyz", secret=SECRET, now=clock.now)
    with pytest.raises(NotAuthorized, match="not one this server signed"):
        links.use(store, _token(run, clock), secret="z" * 48, now=clock.now)
    with pytest.raises(NotAuthorized, match=r"'mallory' to run .*which 'alice' owns"):
        links.use(store, _token(run, clock, owner="mallory"), secret=SECRET, now=clock.now)
    with pytest.raises(NotFound):
        links.use(store, _token("wp_nosuch", clock), secret=SECRET, now=clock.now)
    assert store.grants() == []


def test_signing_out_revokes_a_link_session_and_no_other_token(store: Store,
                                                              clock: FakeClock) -> None:
    run = _run(store)
    secret, grant = links.use(store, _token(run, clock), secret=SECRET, now=clock.now)
    by_hand, typed = tokens.issue(store, holder="alice", role="owner", run_id=None, ttl=None,
                                  by="alice", now=clock.now)
    assert links.sign_out(store, typed, now=clock.now) is False
    assert tokens.authenticate(store, by_hand, now=clock.now) == typed
    assert links.sign_out(store, grant, now=clock.now) is True
    with pytest.raises(Unauthenticated, match="revoked"):
        tokens.authenticate(store, secret, now=clock.now)


def test_a_token_id_is_stored_once(store: Store, clock: FakeClock) -> None:
    grant = Grant(id="tok_link_" + "0" * 32, holder="alice", role=Role.OWNER,
                  created_at=clock.now, created_by="t")
    store.put_token(grant, "a" * 64)
    with pytest.raises(Conflict, match="exists already"):
        store.put_token(grant, "b" * 64)
    assert store.grants() == [grant]
    assert store.token_grant("b" * 64) is None
