"""What the watchdog decides on one packet, without a store: the texts it records (hashed
into history, so the same packet always gives the same bytes) and the due moments behind
them. A sweep that decided nothing asks for the run's next check only where a relay runs:
`decide` must then have weighed every other moment the next check is made of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import example, given
from hypothesis import strategies as st

from waypost.core import watching
from waypost.core.due import (
    deadline_due,
    delivery_stall_due,
    is_due,
    last_sign_of_life,
    next_check_at,
    review_due,
    silent_due,
)
from waypost.events import BlockerOpened
from waypost.model import (
    Approval,
    Blocker,
    BlockerKind,
    Kind,
    Lease,
    Nudge,
    NudgeTopic,
    Packet,
    Progress,
    Result,
    State,
    StopRules,
)

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
moments = st.integers(min_value=0, max_value=7200).map(lambda s: START + timedelta(seconds=s))
maybe_moments = st.none() | moments
spans = st.none() | st.sampled_from([0.0, 30.0, 60, 1800.0, 86400.0])
HALF_HOUR = StopRules(max_silence=1800.0)


def _packet(*, state: State = State.IN_PROGRESS, kind: Kind = Kind.LONG_RUNNING,
            rules: StopRules = HALF_HOUR, heartbeat: datetime | None = None,
            worker: Lease | None = None, note: str | None = None,
            blockers: tuple[Blocker, ...] = (), nudges: tuple[Nudge, ...] = (),
            result: Result | None = None, approval: Approval | None = None) -> Packet:
    return Packet(id="wp_x", title="t", kind=kind, state=state, version=3, owner="alice",
                  created_by="alice", worker=worker, target="file:result.md", stop_rules=rules,
                  blockers=blockers, nudges=nudges, result=result, approval=approval,
                  progress=Progress(note=note, last_heartbeat=heartbeat),
                  created_at=START, updated_at=START)


@st.composite
def packets(draw: st.DrawFn) -> Packet:
    blockers = tuple(
        Blocker(id=f"b{n + 1}", kind=draw(st.sampled_from(BlockerKind)), detail="d",
                opened_at=draw(moments), opened_by="alice", resolved_at=draw(maybe_moments))
        for n in range(draw(st.integers(0, 3))))
    nudges = tuple(Nudge(topic=draw(st.sampled_from(NudgeTopic)), detail="n",
                         at=draw(moments), by="watchdog:t")
                   for _ in range(draw(st.integers(0, 2))))
    lease = draw(st.none() | moments.map(lambda at: Lease(actor="w1", epoch=1, acquired_at=at)))
    result = draw(st.none() | moments.map(
        lambda at: Result(summary="done", submitted_at=at, submitted_by="w1")))
    approval = draw(st.none() | moments.map(lambda at: Approval(by="alice", at=at)))
    rules = StopRules(deadline=draw(maybe_moments), max_silence=draw(spans),
                      review_within=draw(spans))
    return _packet(state=draw(st.sampled_from(State)), kind=draw(st.sampled_from(Kind)),
                   rules=rules, heartbeat=draw(maybe_moments), worker=lease,
                   blockers=blockers, nudges=nudges, result=result, approval=approval)


@given(packets(), moments, st.booleans())
def test_when_decide_records_nothing_only_a_stall_a_relay_excuses_can_be_due(
        packet: Packet, now: datetime, relay_running: bool) -> None:
    if watching.decide(packet, now, relay_running=relay_running) is None:
        excused = relay_running and is_due(delivery_stall_due(packet), now)
        assert excused or not is_due(next_check_at(packet), now)


@given(packets(), st.none() | moments)
def test_the_next_check_is_the_first_due_moment_after(packet: Packet,
                                                      after: datetime | None) -> None:
    due = [m for m in (silent_due(packet), deadline_due(packet), review_due(packet),
                       delivery_stall_due(packet))
           if m is not None and (after is None or m > after)]
    expected = None if packet.kind is Kind.BOUNDED else min(due, default=None)
    assert next_check_at(packet, after=after) == expected


@given(packets())
def test_the_last_sign_of_life_is_the_latest_of_its_moments(packet: Packet) -> None:
    resolved = [b.resolved_at for b in packet.blockers
                if b.kind is BlockerKind.WORKER_SILENT and b.resolved_at is not None]
    heard = [packet.progress.last_heartbeat] if packet.progress.last_heartbeat else []
    leased = [packet.worker.acquired_at] if packet.worker else []
    assert last_sign_of_life(packet) == max([packet.created_at, *heard, *leased, *resolved])


def test_a_resolved_silence_restarts_the_clock_and_the_first_moment_is_checked_first(
        ) -> None:
    """The two properties above, at the cases their random packets reach only sometimes."""
    at = [START + timedelta(minutes=m) for m in range(4)]
    looked = Blocker(id="b1", kind=BlockerKind.WORKER_SILENT, detail="d", opened_at=at[1],
                     opened_by="watchdog:t", resolved_at=at[3])
    packet = _packet(heartbeat=at[1], worker=Lease(actor="w1", epoch=1, acquired_at=at[2]),
                     blockers=(looked,), rules=StopRules(max_silence=1800.0, deadline=at[3]))
    assert last_sign_of_life(packet) == at[3]
    assert silent_due(packet) == at[3] + timedelta(minutes=30)
    assert next_check_at(packet) == at[3]  # the deadline, due before the silence


def test_the_silent_detail_names_the_quiet_the_limit_the_note_and_the_holder() -> None:
    lease = Lease(actor="w1", epoch=2, acquired_at=START + timedelta(minutes=5))
    quiet = _packet(worker=lease, note="reproduced the race")
    data = watching.decide(quiet, START + timedelta(hours=2), relay_running=False)
    assert data == BlockerOpened(
        blocker_id="b1", kind=BlockerKind.WORKER_SILENT,
        detail="silent for 1h55m (max silence 30m): no heartbeat since 2026-01-02 03:09:05Z;"
        ' last note: "reproduced the race"; lease holder: w1 (epoch 2)')
    heard = _packet(heartbeat=START + timedelta(seconds=30.5), rules=StopRules(max_silence=60))
    assert watching.silent_detail(heard, START + timedelta(seconds=100)) == (
        "silent for 1m09s (max silence 1m): last heartbeat 2026-01-02 03:04:35Z;"
        " last note: none; lease holder: nobody")


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30)))
@example(datetime(999, 12, 31, 23, 59, 59, 999999))  # strftime may leave such a year unpadded
def test_recorded_moments_read_as_strftime_writes_them_in_any_year(naive: datetime) -> None:
    at = naive.replace(tzinfo=UTC)
    stamp = f"{at:%Y-%m-%d %H:%M:%S}"
    rules = StopRules(deadline=at, max_silence=60.0)
    late = _packet(state=State.BLOCKED, rules=rules)
    assert watching.decide(late, at, relay_running=False) == BlockerOpened(
        blocker_id="b1", kind=BlockerKind.DEADLINE_PASSED,
        detail=f"the deadline {stamp}Z passed while the run was blocked")
    heard = _packet(heartbeat=at, rules=rules)
    assert f"last heartbeat {stamp}Z;" in watching.silent_detail(heard, at)
