"""Starting a run. Its parameters are decided once, by `start_spec`, from what any door
read (a flag's text, a JSON body, a tool's arguments, the library's typed values) into one
`StartSpec`; `start` then decides what needs the store (text limits it may raise, where
file targets resolve), commits the `Started` event and the packet at once, and returns
the same run for the same parameters under the same idempotency key."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, overload

import msgspec

from waypost import inputs
from waypost.config import Config
from waypost.core.due import lease_until
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.durations import (
    Clock,
    new_run_id,
    parse_deadline,
    parse_duration,
    utcnow,
    within_ten_years,
)
from waypost.errors import InvalidInput
from waypost.events import Started
from waypost.model import Gate, Kind, StopRules, to_json
from waypost.store.base import Store
from waypost.usecases.fields import check_targets, checked_text
from waypost.usecases.gates import declared
from waypost.usecases.runs import Run

Seconds = str | float | None  # a duration as a door has it: text (`2h`) or seconds


class StartSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A new run's parameters, decided by `start_spec` (build it there, never by hand):
    every value well-formed and within limits, durations in seconds, gates parsed."""

    title: str
    kind: Kind  # explicit, else classified from `expect` against the configured threshold
    owner: str | None = None  # None: the actor who starts it
    target: str | None = None  # None: none: for bounded work; refused for long_running
    notify: str | None = None
    expect: float | None = None  # seconds
    deadline: datetime | None = None  # an absolute deadline (UTC)
    deadline_in: float | None = None  # `+4h`: seconds after the moment the run starts
    heartbeat_interval: float | None = None
    max_silence: float | None = None
    review_within: float | None = None
    gates: tuple[Gate, ...] = ()  # the run's own; the project's `[gates]` join at start
    worker: str | None = None
    idempotency_key: str | None = None
    session: str | None = None  # an agent host's session id: how its hooks find the run
    fingerprint: str = ""  # the parameters as asked: what the idempotency key compares


def start_spec(
    title: str, *, owner: str | None = None, target: str | None = None,
    notify: str | None = None, kind: Kind | str | None = None, expect: Seconds = None,
    deadline: datetime | str | None = None, heartbeat_interval: Seconds = None,
    max_silence: Seconds = None, review_within: Seconds = None,
    gates: Sequence[Gate | str] = (), worker: str | None = None,
    idempotency_key: str | None = None, session: str | None = None,
    config: Config | None = None, clock: Clock = utcnow,
) -> StartSpec:
    """The one decision of a run's start parameters, for every door: names, URIs' length,
    the kind, durations (`2h` or seconds), the deadline (ISO 8601, `+4h` or a datetime)
    and gates (`NAME=KIND:ARG` or Gate records, every check parsed). A refusal is
    InvalidInput in the same words whichever door asked."""
    _check_names(owner=owner, worker=worker, idempotency_key=idempotency_key,
                 session=session, target=target, notify=notify)
    asked_kind = _kind(kind)
    expected = _seconds(expect, "expect")
    interval = _seconds(heartbeat_interval, "heartbeat_interval")
    silence = _seconds(max_silence, "max_silence")
    review = _seconds(review_within, "review_within")
    at, after = _deadline(deadline, clock)
    own_gates = tuple(_gate(g) for g in gates)
    threshold = (config or Config()).long_running_after
    return StartSpec(
        title=title, kind=classify(asked_kind, expected, threshold), owner=owner,
        target=target, notify=notify, expect=expected, deadline=at, deadline_in=after,
        heartbeat_interval=interval, max_silence=silence, review_within=review,
        gates=own_gates, worker=worker, idempotency_key=idempotency_key, session=session,
        fingerprint=_fingerprint(  # in this order since the first release: keep it
            title, owner, target, notify, asked_kind, expected, deadline, interval, silence,
            review, own_gates, worker))


def _seconds(value: Seconds, field: str) -> float | None:
    return None if value is None else parse_duration(value, field, positive=True)


def _check_names(*, owner: str | None, worker: str | None, idempotency_key: str | None,
                 session: str | None, target: str | None, notify: str | None) -> None:
    for field, who in (("owner", owner), ("worker", worker)):
        if who is not None:
            inputs.name(who, field)
    for field, key in (("idempotency_key", idempotency_key), ("session", session)):
        if key is not None:
            inputs.key(key, field)
    for field, uri in (("target", target), ("notify", notify)):
        if uri is not None:
            inputs.text(uri, field, limit=inputs.TEXT_LIMITS["uri"], required=False)


def _kind(kind: Kind | str | None) -> Kind | None:
    if kind is None or isinstance(kind, Kind):
        return kind
    try:
        return Kind(kind)
    except ValueError:
        raise InvalidInput(f"kind {kind!r} is not one of: {', '.join(Kind)}",
                           hint="bounded (finishes inline) or long_running (detached)") from None


def classify(kind: Kind | None, expect: float | None, threshold: float) -> Kind:
    """Explicit kind wins; else `expect` against the threshold; else bounded."""
    if kind is not None:
        return kind
    if expect is not None and expect > threshold:
        return Kind.LONG_RUNNING
    return Kind.BOUNDED


def _deadline(deadline: datetime | str | None,
              clock: Clock) -> tuple[datetime | None, float | None]:
    """(an absolute deadline, or seconds after the start for `+4h`)."""
    if deadline is None:
        return None, None
    if isinstance(deadline, str) and deadline.startswith("+"):
        return None, parse_duration(deadline[1:], "deadline")
    if isinstance(deadline, str):
        return parse_deadline(deadline, clock(), "deadline"), None
    return within_ten_years(deadline, clock(), "deadline"), None


def _gate(gate: Gate | str) -> Gate:
    """A gate of the run's own: `NAME=KIND:ARG` parsed, its check parsed (an unknown kind
    is refused now, before the run exists)."""
    from waypost.usecases.checks import parse_check  # here: the hot verbs never start a run

    found = parse_gate(gate) if isinstance(gate, str) else gate
    inputs.text(f"{found.name}={found.check}", "gate")
    parse_check(found.check)
    return found


def parse_gate(spec: str) -> Gate:
    """`NAME=KIND:ARG` (a trailing `?` on NAME makes the gate optional)."""
    name, sep, check = spec.partition("=")
    if not sep or not name.strip() or (":" not in check and check != "no-private"):
        raise InvalidInput(f"bad gate {spec!r}",
                           hint="write NAME=KIND:ARG, e.g. tests='command:pytest -q'")
    required = not name.endswith("?")
    return Gate(name=name.rstrip("?").strip(), check=check.strip(), required=required)


@overload
def start(store: Store, spec: StartSpec, /, *, actor: str, config: Config | None = None,
          clock: Clock = utcnow) -> tuple[Run, bool]: ...


@overload
def start(
    store: Store, title: str, /, *, actor: str, owner: str | None = None,
    target: str | None = None, notify: str | None = None, kind: Kind | str | None = None,
    expect: Seconds = None, deadline: datetime | str | None = None,
    heartbeat_interval: Seconds = None, max_silence: Seconds = None,
    review_within: Seconds = None, gates: Sequence[Gate | str] = (),
    worker: str | None = None, idempotency_key: str | None = None,
    config: Config | None = None, clock: Clock = utcnow, session: str | None = None,
) -> tuple[Run, bool]: ...


def start(store: Store, spec: StartSpec | str, /, *, actor: str, config: Config | None = None,
          clock: Clock = utcnow, **asked: Any) -> tuple[Run, bool]:
    """Record a new run's packet before work begins; returns (run, created). Give the
    `StartSpec` a door decided, or a title and its parameters (decided here, the same way,
    by `start_spec`)."""
    config = config or Config()
    if isinstance(spec, str):
        spec = start_spec(spec, config=config, clock=clock, **asked)
    elif asked:
        raise TypeError(f"start() takes a StartSpec or a title with parameters, not both "
                        f"(got {', '.join(sorted(asked))})")
    checked_text(store, spec.title, "title")
    inputs.name(actor, "actor")
    check_targets(store, config, target=spec.target, notify=spec.notify)
    gates = declared(with_default_gates(spec.gates, config), actor)
    now = clock()
    run_id = new_run_id(now)
    event = make_event(None, run_id, _started(spec, actor, gates, now), actor=actor, at=now)
    packet, created = store.create(event, apply(None, event), fingerprint=spec.fingerprint,
                                   session_id=spec.session)
    return Run(store, packet.id, actor=actor, clock=clock), created


def _started(spec: StartSpec, actor: str, gates: tuple[Gate, ...], now: datetime) -> Started:
    deadline = spec.deadline if spec.deadline_in is None else (
        now + timedelta(seconds=spec.deadline_in))
    rules = StopRules(deadline=deadline, heartbeat_interval=spec.heartbeat_interval,
                      max_silence=spec.max_silence, review_within=spec.review_within)
    default_target = "" if spec.kind is Kind.LONG_RUNNING else "none:"
    return Started(
        title=spec.title, kind=spec.kind, owner=spec.owner if spec.owner is not None else actor,
        target=spec.target if spec.target is not None else default_target,
        notify=spec.notify, worker=spec.worker, lease_expires_at=lease_until(rules, now),
        stop_rules=rules, gates=gates, idempotency_key=spec.idempotency_key)


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
