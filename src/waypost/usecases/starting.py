"""Starting a run: its parameters decided (text within limits, names, targets, gates,
durations) before anything is written, then the `Started` event and the packet committed
at once; the same parameters under the same idempotency key return the same run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from waypost import inputs
from waypost.config import Config
from waypost.core.due import lease_until
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.durations import MAX_DURATION, Clock, new_run_id, parse_deadline, utcnow
from waypost.errors import InvalidInput
from waypost.events import Started
from waypost.model import Gate, Kind, StopRules, to_json
from waypost.store.base import Store
from waypost.usecases.fields import check_targets, checked_text
from waypost.usecases.gates import declared
from waypost.usecases.runs import Run


def classify(kind: Kind | None, expect: float | None, threshold: float) -> Kind:
    """Explicit kind wins; else `expect` against the threshold; else bounded."""
    if kind is not None:
        return kind
    if expect is not None and expect > threshold:
        return Kind.LONG_RUNNING
    return Kind.BOUNDED


def parse_gate(spec: str) -> Gate:
    """`NAME=KIND:ARG` (a trailing `?` on NAME makes the gate optional)."""
    name, sep, check = spec.partition("=")
    if not sep or not name.strip() or (":" not in check and check != "no-private"):
        raise InvalidInput(f"bad gate {spec!r}",
                           hint="write NAME=KIND:ARG, e.g. tests='command:pytest -q'")
    required = not name.endswith("?")
    return Gate(name=name.rstrip("?").strip(), check=check.strip(), required=required)


def start(
    store: Store, title: str, *, actor: str, owner: str | None = None,
    target: str | None = None, notify: str | None = None, kind: Kind | None = None,
    expect: float | None = None, deadline: datetime | str | None = None,
    heartbeat_interval: float | None = None, max_silence: float | None = None,
    review_within: float | None = None, gates: Sequence[Gate] = (), worker: str | None = None,
    idempotency_key: str | None = None, config: Config | None = None,
    clock: Clock = utcnow, session: str | None = None,
) -> tuple[Run, bool]:
    """Record a new run's packet before work begins; returns (run, created). `session`
    (an agent host's session id) is how that host's hooks find the run."""
    config = config or Config()
    if session is not None:
        inputs.key(session, "--session")
    _check_start(store, title, actor=actor, owner=owner, worker=worker,
                 idempotency_key=idempotency_key, target=target, notify=notify, gates=gates,
                 numbers={"expect": expect, "heartbeat_interval": heartbeat_interval,
                          "max_silence": max_silence, "review_within": review_within})
    check_targets(store, config, target=target, notify=notify)
    now = clock()
    fingerprint = _fingerprint(title, owner, target, notify, kind, expect, deadline,
                               heartbeat_interval, max_silence, review_within, gates, worker)
    resolved_kind = classify(kind, expect, config.long_running_after)
    if isinstance(deadline, str):
        deadline = parse_deadline(deadline, now)
    rules = StopRules(deadline=deadline, heartbeat_interval=heartbeat_interval,
                      max_silence=max_silence, review_within=review_within)
    data = Started(
        title=title, kind=resolved_kind, owner=owner if owner is not None else actor,
        target=target if target is not None else ("" if resolved_kind is Kind.LONG_RUNNING
                                                  else "none:"),
        notify=notify, worker=worker, lease_expires_at=lease_until(rules, now),
        stop_rules=rules, gates=declared(with_default_gates(gates, config), actor),
        idempotency_key=idempotency_key,
    )
    run_id = new_run_id(now)
    event = make_event(None, run_id, data, actor=actor, at=now)
    packet, created = store.create(event, apply(None, event), fingerprint=fingerprint,
                                   session_id=session)
    return Run(store, packet.id, actor=actor, clock=clock), created


def _check_start(store: Store, title: str, *, actor: str, owner: str | None,
                 worker: str | None, idempotency_key: str | None, target: str | None,
                 notify: str | None, gates: Sequence[Gate],
                 numbers: Mapping[str, float | None]) -> None:
    """Everything a new run's parameters must be, decided before anything is written."""
    checked_text(store, title, "title")
    inputs.name(actor, "actor")
    for field, who in (("owner", owner), ("worker", worker)):
        if who is not None:
            inputs.name(who, field)
    if idempotency_key is not None:
        inputs.key(idempotency_key)
    for field, uri in (("target", target), ("notify", notify)):
        if uri is not None:
            inputs.text(uri, field, limit=inputs.TEXT_LIMITS["uri"], required=False)
    for gate in gates:
        inputs.text(f"{gate.name}={gate.check}", "gate")
    for field, seconds in numbers.items():
        if seconds is not None:
            inputs.finite(seconds, field, low=0, high=MAX_DURATION)


def with_default_gates(gates: Sequence[Gate], config: Config) -> tuple[Gate, ...]:
    """The project's `[gates]` first, then the run's own (which win on the same name);
    every check is parsed now, so a typo is refused before the run exists."""
    from waypost.usecases.checks import parse_check  # here: the hot verbs never start a run

    merged = {g.name: g for g in (parse_gate(f"{n}={c}") for n, c in config.gates)}
    merged.update((g.name, g) for g in gates)
    for gate in merged.values():
        parse_check(gate.check)
    return tuple(merged.values())


def _fingerprint(*params: object) -> str:
    import hashlib  # here: the hot verbs never start a run

    return hashlib.sha256(to_json([str(p) if isinstance(p, datetime) else p
                                   for p in params])).hexdigest()
