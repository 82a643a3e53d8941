"""`waypost limits`: the longest text each field takes, and the store's own raised limits."""

from __future__ import annotations

from collections.abc import Sequence

import click

from waypost.cli.context import Ctx, verb
from waypost.errors import InvalidInput
from waypost.inputs import TEXT_LIMITS, whole

MOST = 10_000_000  # no field takes more than this, whatever a store says


@click.command()
@click.option("--set", "changes", multiple=True, metavar="FIELD=N",
              help="Raise FIELD's limit to N characters for everyone using this store.")
@verb
def limits(ctx: Ctx, changes: Sequence[str]) -> None:
    """The text limits in force: fixed in waypost, raised per store with --set.

    A store's limit applies to every host that shares it (one PostgreSQL store, many
    machines). Limits can be raised, not lowered below waypost's own; text stored under
    older limits stays readable.
    """
    wanted = [_parse(change) for change in changes]  # all decided before any is written
    for field, value in wanted:
        ctx.store.put_setting(f"limit.{field}", str(value))
    stored = ctx.store.settings()
    rows = {field: {"fixed": fixed, "store": _int(stored.get(f"limit.{field}"))}
            for field, fixed in TEXT_LIMITS.items()}
    lines = [f"{'FIELD':<16} {'FIXED':>7}  STORE"] + [
        f"{field:<16} {row['fixed']:>7}  {row['store'] or ''}".rstrip()
        for field, row in rows.items()]
    ctx.emit({"limits": rows}, "\n".join(lines))


def _parse(change: str) -> tuple[str, int]:
    field, sep, raw = change.partition("=")
    if not sep or field not in TEXT_LIMITS:
        raise InvalidInput(f"--set {change!r}: write FIELD=N with a field of: "
                           + ", ".join(TEXT_LIMITS), hint="e.g. --set note=20000")
    return field, whole(raw, f"--set {field}=N: N", low=TEXT_LIMITS[field], high=MOST,
                        hint=f"no lower than waypost's own limit; e.g. --set "
                             f"{field}={TEXT_LIMITS[field] * 4}")


def _int(raw: str | None) -> int | None:
    return int(raw) if raw is not None and raw.isdigit() else None
