"""Bearer tokens: the store keeps only a hash; a live token names its grant; a malformed,
unknown, expired or revoked one is Unauthenticated and nothing else, on every backend."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import Cli, FakeClock, dump_store
from waypost.errors import InvalidInput, NotFound, Unauthenticated
from waypost.model import Role
from waypost.store import Store, open_store
from waypost.usecases import starting, tokens


def test_a_token_names_its_grant_until_it_is_revoked(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:")
    secret, grant = tokens.issue(store, holder="worker-1", role="worker", run_id=run.id,
                                 ttl=None, by="alice", now=clock.now)
    assert secret.startswith("wpt_")
    assert grant.id[4:] in secret
    found = tokens.authenticate(store, secret, now=clock.now)
    assert (found.holder, found.role, found.run_id) == ("worker-1", Role.WORKER, run.id)
    assert [g.id for g in store.grants()] == [grant.id]
    revoked = tokens.revoke(store, grant.id, now=clock.now)
    assert revoked.revoked_at is not None
    assert not tokens.live(revoked, clock.now)
    with pytest.raises(Unauthenticated, match="revoked"):
        tokens.authenticate(store, secret, now=clock.now)
    clock.advance(60)  # a second revoke keeps the first time
    assert tokens.revoke(store, grant.id).revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        tokens.revoke(store, "tok_nosuch")


def test_a_token_expires(store: Store, clock: FakeClock) -> None:
    secret, grant = tokens.issue(store, holder="bob", role="viewer", run_id=None,
                                 ttl=timedelta(hours=1), by="alice", now=clock.now)
    assert tokens.authenticate(store, secret, now=clock.now).id == grant.id
    clock.advance(3600)
    with pytest.raises(Unauthenticated, match="expired"):
        tokens.authenticate(store, secret, now=clock.now)


def test_issue_decides_everything_before_it_stores(store: Store) -> None:
    with pytest.raises(InvalidInput, match="role"):
        tokens.issue(store, holder="bob", role="admin", run_id=None, ttl=None, by="alice")
    with pytest.raises(InvalidInput):
        tokens.issue(store, holder=" bob", role="owner", run_id=None, ttl=None, by="alice")
    with pytest.raises(NotFound):
        tokens.issue(store, holder="bob", role="worker", run_id="wp_nosuch", ttl=None,
                     by="alice")
    with pytest.raises(InvalidInput, match="ttl"):
        tokens.issue(store, holder="bob", role="owner", run_id=None, ttl=timedelta(0),
                     by="alice")
    assert store.grants() == []


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=st.one_of(st.text(max_size=300), st.just("wpt_"),
                      st.text(alphabet="abc_-0", max_size=80).map(lambda t: "wpt_" + t)))
def test_whatever_is_sent_is_a_grant_or_unauthenticated(store: Store, sent: str) -> None:
    with pytest.raises(Unauthenticated):
        tokens.authenticate(store, sent)


def test_the_store_keeps_no_secret_and_the_cli_shows_it_once(cli: Cli) -> None:
    issued = json.loads(cli.ok("token", "issue", "--holder", "bob", "--role", "owner",
                               "--ttl", "7d", "--json"))
    secret = issued["token"]
    assert issued["grant"]["holder"] == "bob"
    assert issued["grant"]["expires_at"]
    dump = json.dumps(dump_store(Path(cli.store)), default=str)
    assert secret not in dump
    assert secret.split("_")[-1] not in dump
    listed = cli.ok("token", "ls")
    assert issued["grant"]["id"] in listed
    assert secret not in listed
    assert json.loads(cli.ok("token", "ls", "--json"))["tokens"][0]["live"] is True
    cli.ok("token", "revoke", issued["grant"]["id"])
    assert json.loads(cli.ok("token", "ls", "--json"))["tokens"][0]["live"] is False


def test_the_printed_token_is_stdout_whole_so_a_shell_can_keep_it(cli: Cli) -> None:
    """TOKEN=$(waypost token issue …) holds the token and nothing else: the grant's line
    and the advice to keep it go to stderr."""
    issued = cli("token", "issue", "--holder", "bob", "--role", "owner")
    assert issued.code == 0
    assert issued.out.strip().count("\n") == 0
    assert issued.out.startswith("wpt_")
    assert "not shown again" in issued.err
    with open_store(str(cli.store)) as store:
        assert tokens.authenticate(store, issued.out.strip()).holder == "bob"


@pytest.mark.parametrize("args", [
    ("--holder", "w", "--role", "worker"),  # a worker token names its run or says --all
    ("--holder", "w", "--role", "worker", "--run", "r", "--all"),
    ("--holder", "w", "--role", "owner", "--ttl", "0"),
    ("--holder", "w", "--role", "root"),
])
def test_token_issue_refuses_bad_arguments_and_stores_nothing(cli: Cli,
                                                              args: tuple[str, ...]) -> None:
    cli.ok("start", "t", "--target", "none:")
    before = dump_store(Path(cli.store))
    assert cli("token", "issue", *args).code == 2
    assert dump_store(Path(cli.store)) == before
