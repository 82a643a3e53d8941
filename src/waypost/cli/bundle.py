"""`waypost export`, `waypost verify-bundle`, `waypost import` and `waypost keys`: a run
handed to anyone, checked where it lands, brought in to read, and the keys that sign it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from waypost.cli.context import Ctx, verb
from waypost.display import printable
from waypost.errors import InvalidInput
from waypost.model import to_json
from waypost.store.keys import PublicKey
from waypost.usecases import keys

_F = TypeVar("_F", bound=Callable[..., Any])

KEY_SOURCE = ("the signing key: a private key file only its owner may read (--key-file, or "
              "WAYPOST_SIGNING_KEY_FILE), or the name of an environment variable holding one")


@click.command("export")
@click.argument("run_id", metavar="RUN")
@click.option("-o", "--out", required=True, metavar="FILE",
              help="The bundle to write (a tar file); never overwritten half way.")
@click.option("--key-file", envvar="WAYPOST_SIGNING_KEY_FILE", metavar="FILE",
              help="The private key that signs the statement (owner-only file).")
@click.option("--key-env", metavar="NAME",
              help="The environment variable holding the private key (PEM) instead.")
@verb
def export(ctx: Ctx, run_id: str, out: str, key_file: str | None,
           key_env: str | None) -> None:
    """Write RUN as one signed bundle: its packet, every event, every blob it names, and an
    in-toto statement in a DSSE envelope, signed by a key this store records.

    Check it anywhere with: waypost verify-bundle FILE --keyring RING (the store's keys:
    waypost keys export --keyring)."""
    from waypost.usecases.bundles import export as write

    signer = keys.load_signer(ctx.store, path=key_file, env=key_env)
    done = write(ctx.store, run_id, out, signer, deny=ctx.config.deny,
                 allow=ctx.config.allow)
    ctx.emit(done, f"wrote {done.file}: run {done.run}, {done.events} events, {done.blobs} "
                   f"blobs, signed by key {done.keyid[:16]} ({done.holder})")


VERIFY_HELP = """Check a bundle with no store and no network: the signature over its
statement, every event's hash and link, that the packet is the fold of the events, that the
statement says what the events say, and every blob's sha256. Names the first broken thing.

Keys a bundle carries prove integrity only: without --key or --keyring it says "intact,
signer not pinned", never "verified".

\b
Exit codes:
   0  verified: intact, signed by a pinned key valid when it signed
  10  intact, signer not pinned (checked against the bundle's own key)
  11  malformed: not a bundle (container, member name, kind or size)
  12  signature: not signed, altered, or by an unknown or retired key
  13  chain: an event altered, missing or out of order
  14  packet: not the fold of the events
  15  blob: missing, extra, or not its sha256
  16  statement: says what the events do not
   2  usage: bad options, or a key or keyring that does not read"""


def pinning(command: _F) -> _F:
    """The options naming the keys a bundle's signer is pinned to."""
    command = click.option(
        "--keyring", metavar="FILE",
        help="A keyring (waypost keys export --keyring): keys with their validity.")(command)
    return click.option("--key", "key_files", multiple=True, metavar="PUB",
                        help="A public key (PEM) to pin; repeatable.")(command)


@click.command("verify-bundle", help=VERIFY_HELP)
@click.argument("file", metavar="FILE")
@pinning
@verb
def verify_bundle(ctx: Ctx, file: str, key_files: tuple[str, ...],
                  keyring: str | None) -> None:
    from waypost.usecases import verifying

    pinned = _pinned(key_files, keyring)
    try:
        source = open(file, "rb")  # noqa: SIM115  # closed below, after the one pass
    except OSError as exc:
        raise InvalidInput(f"cannot open {file}: {exc.strerror}") from None
    with source:
        report = verifying.verify(source, pinned)
    ctx.emit(report, lambda: _report(report))
    code = verifying.EXIT_CODES[report.outcome]
    if code:
        raise click.exceptions.Exit(code)


@click.command("import")
@click.argument("file", metavar="FILE")
@pinning
@verb
def import_run(ctx: Ctx, file: str, key_files: tuple[str, ...], keyring: str | None) -> None:
    """Put the run a bundle holds into this store, read-only, once it verifies as
    verify-bundle checks it (anything not intact is refused, and nothing stored).

    The run shows in ls, show and on the board as imported, with its origin (who signed
    the bundle, from which file). Nothing here writes to it: no verb, door, watchdog,
    relay or prune. The same bundle imported again stores nothing; another history under
    a run id already here is refused."""
    from waypost.usecases.imports import import_bundle

    done = import_bundle(ctx.store, file, _pinned(key_files, keyring))
    said = (f"imported run {done.run} ({done.events} events, {done.blobs} blobs) from "
            f"{done.origin.said()}: read-only here" if done.imported else
            f"run {done.run} is here already with this history: nothing to import")
    ctx.emit(done, said)


def _pinned(key_files: tuple[str, ...], keyring: str | None) -> list[PublicKey]:
    from waypost.usecases import verifying

    pinned = [verifying.pinned_key(_read(path, 64 * 1024), path) for path in key_files]
    if keyring is not None:
        pinned += keys.read_keyring(_read(keyring, keys.MAX_KEYRING + 1), keyring).keys
    return pinned


def _report(report: object) -> str:
    from waypost.usecases.verifying import Report

    assert isinstance(report, Report)
    if report.ok:
        return report.message
    where = ", ".join(part for part in (
        report.member, f"seq {report.seq}" if report.seq else None,
        f"blob {report.blob}" if report.blob else None) if part)
    return f"broken ({report.outcome}): {where}: {report.message}"


def _read(path: str, limit: int) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(limit)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None


@click.group("keys")
def keys_group() -> None:
    """Ed25519 keys that sign bundles: the store keeps the public half, with its holder and
    validity; the private half stays in an owner-only file (or an environment variable)."""


@keys_group.command()
@click.option("--holder", required=True, metavar="NAME", help="Who signs with it.")
@click.option("--out", required=True, metavar="FILE",
              help="Where to write the private key (a new file, mode 600).")
@verb
def generate(ctx: Ctx, holder: str, out: str) -> None:
    """Make a key: its private half in FILE, its public half recorded in the store."""
    key = keys.generate(ctx.store, holder=holder, out=out)
    ctx.emit(key, f"{_line(key)}\nprivate key written to {out} (mode 600)")


@keys_group.command("ls")
@verb
def listing(ctx: Ctx) -> None:
    """Every key: id, holder, valid from, retired at."""
    found = keys.listed(ctx.store)
    ctx.emit(found, "\n".join(map(_line, found)) or "no keys")


@keys_group.command("export")
@click.argument("keyid", required=False, metavar="KEYID")
@click.option("--keyring", "ring", is_flag=True,
              help="Every key with its validity, as verify-bundle --keyring reads it.")
@verb
def export_key(ctx: Ctx, keyid: str | None, ring: bool) -> None:
    """Print a key's public half (PEM), or with --keyring every key with its validity."""
    if ring == (keyid is not None):
        raise InvalidInput("name one key (KEYID) or say --keyring", hint="see: waypost keys ls")
    if ring:
        click.echo(to_json(keys.keyring(ctx.store)).decode())
        return
    assert keyid is not None
    key = keys.find(ctx.store, keyid)
    ctx.emit(key, key.public_key.rstrip("\n"))


@keys_group.command()
@click.argument("keyid", metavar="KEYID")
@verb
def retire(ctx: Ctx, keyid: str) -> None:
    """Retire a key now: it signs nothing after; what it signed before still verifies."""
    key = keys.retire(ctx.store, keyid)
    ctx.emit(key, _line(key))


def _line(key: PublicKey) -> str:
    retired = f", retired {key.retired_at:%Y-%m-%d %H:%M:%S}" if key.retired_at else ""
    return (f"{key.keyid[:16]}  {printable(key.holder)}  valid from "
            f"{key.valid_from:%Y-%m-%d %H:%M:%S}{retired}")
