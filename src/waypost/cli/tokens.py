"""`waypost token issue|ls|revoke`: the bearer tokens `waypost serve` (and `waypost mcp
--http`) take. The secret is printed once; the store keeps only its hash."""

from __future__ import annotations

from datetime import timedelta

import click

from waypost.cli.context import Ctx, verb
from waypost.durations import parse_duration
from waypost.errors import InvalidInput
from waypost.model import Grant, Role
from waypost.usecases import tokens


@click.group("token")
def token_group() -> None:
    """Bearer tokens for the HTTP API: issue one per worker, owner or viewer; list; revoke.

    Whoever issues a token on a local store is trusted, as `--as` is: a token's holder is
    the actor the rules see, and its role caps what that actor may do over HTTP.
    """


@token_group.command()
@click.option("--holder", required=True, metavar="NAME",
              help="Who acts with it: recorded as the actor of every write it makes.")
@click.option("--role", required=True, type=click.Choice([r.value for r in Role]),
              help="worker: its run's work; owner: also review, approve, cancel, retarget "
              "(on runs the holder owns); watcher and viewer: read.")
@click.option("--run", "run_id", metavar="RUN", help="The one run it acts on.")
@click.option("--all", "every_run", is_flag=True, help="Every run (the default for owner, "
              "watcher and viewer; a worker token names its run or says --all).")
@click.option("--ttl", metavar="DURATION", help="Expire after this long, e.g. 7d or 12h.")
@verb
def issue(ctx: Ctx, holder: str, role: str, run_id: str | None, every_run: bool,
          ttl: str | None) -> None:
    """Issue a token and print its secret: the only time it is shown."""
    if run_id is not None and every_run:
        raise InvalidInput("--run and --all exclude each other", hint="give one")
    if role == Role.WORKER and run_id is None and not every_run:
        raise InvalidInput("a worker token names its run (--run RUN) or says --all",
                           hint=f"e.g. waypost token issue --holder {holder[:40]} "
                           "--role worker --run RUN")
    lasts = timedelta(seconds=parse_duration(ttl, "--ttl", positive=True)) if ttl else None
    secret, grant = tokens.issue(ctx.store, holder=holder, role=role, run_id=run_id,
                                 ttl=lasts, by=ctx.actor)
    # the secret alone on stdout, so TOKEN=$(waypost token issue …) holds just the token
    ctx.emit({"token": secret, "grant": grant}, secret)
    if not ctx.json:
        click.echo(f"{_line(grant)}\nkeep it: it is not shown again "
                   f"(revoke with: waypost token revoke {grant.id})", err=True)


@token_group.command("ls")
@verb
def listing(ctx: Ctx) -> None:
    """Every token: id, holder, role, scope, and whether it still works."""
    found = ctx.store.grants()
    ctx.emit({"tokens": [{**_document(g), "live": tokens.live(g)} for g in found]},
             "\n".join(_line(g) for g in found) or "no tokens")


@token_group.command()
@click.argument("token_id", metavar="ID")
@verb
def revoke(ctx: Ctx, token_id: str) -> None:
    """Revoke a token: every later request with it is refused, and its open streams close."""
    grant = tokens.revoke(ctx.store, token_id)
    ctx.emit({"grant": grant}, f"revoked {_line(grant)}")


def _line(g: Grant) -> str:
    scope = f"run {g.run_id}" if g.run_id else "every run"
    until = (f"revoked {g.revoked_at:%Y-%m-%d %H:%M}Z" if g.revoked_at
             else f"until {g.expires_at:%Y-%m-%d %H:%M}Z" if g.expires_at else "no expiry")
    return f"{g.id}  {g.holder}  {g.role.value}  {scope}  {until}"


def _document(g: Grant) -> dict[str, object]:
    import msgspec

    document: dict[str, object] = msgspec.to_builtins(g)
    return document
