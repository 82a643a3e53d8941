"""What every verb decides of a request's fields before anything else: text within its
limit (the fixed one, or the store's own where the store raised it), and a target or
notify URI's syntax. `Run`'s verbs and `start` both ask."""

from __future__ import annotations

from waypost import inputs
from waypost.config import Config
from waypost.store.base import Store

__all__ = ["check_targets", "checked_text"]


def checked_text(store: Store, value: str, field: str, *, required: bool = True) -> str:
    """`value` within the field's limit: the fixed one, or the store's own where the store
    raised it (read only for a value over the fixed limit)."""
    limit = _store_limit(store, field) if inputs.over_limit(value, field) else None
    return inputs.text(value, field, limit=limit, required=required)


def _store_limit(store: Store, field: str) -> int | None:
    raw = store.settings().get(f"limit.{field}")
    return int(raw) if raw is not None and raw.isdigit() else None


def check_targets(store: Store, config: Config, *, target: str | None,
                   notify: str | None) -> None:
    """Refuse a malformed target or notify URI before the run exists (InvalidInput)."""
    from waypost.core.targets import check_uri  # here: the hot verbs never start a run
    from waypost.delivery.settings import places_at_start

    places = places_at_start(getattr(store, "path", None), config.path)
    for field, uri in (("target", target), ("notify", notify)):
        if uri is not None:
            check_uri(uri, places, field=field)
