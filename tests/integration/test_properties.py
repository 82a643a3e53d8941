"""Property tests: any sequence of commands keeps the invariants, on a real SQLite store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.helpers import FakeClock
from waypost.core.history import verify_run
from waypost.core.machine import fold
from waypost.errors import InvalidInput, NotFound, Refused
from waypost.model import (
    TERMINAL,
    Artifact,
    ArtifactRole,
    BlockerKind,
    EvidenceKind,
    Kind,
    Packet,
    State,
)
from waypost.store import open_store
from waypost.usecases import runs, starting

# the owner most often, so that runs get far (ready, reviewed, approved) as well as refused
ACTORS = st.sampled_from(["alice", "alice", "alice", "w1", "w2", "mallory"])
REFUSALS = (Refused, InvalidInput, NotFound)


class PacketMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="waypost-prop-"))
        self.store = open_store(str(self.folder / "p.db"))
        self.clock = FakeClock()
        run, _ = starting.start(self.store, "prop", actor="alice", owner="alice",
                            target="none:", kind=Kind.LONG_RUNNING, max_silence=60,
                            clock=self.clock)
        self.run_id = run.id
        self.seen_terminal: State | None = None

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def packet(self) -> Packet:
        return self.store.get(self.run_id)

    def handle(self, actor: str) -> runs.Run:
        self.clock.advance(1)
        return runs.Run(self.store, self.run_id, actor=actor, clock=self.clock)

    def attempt(self, actor: str, action: str, *args: object) -> Packet | None:
        """Run one command; a refusal must leave version and history untouched."""
        before = self.packet
        before_events = len(self.store.events(self.run_id))
        run = self.handle(actor)
        try:
            result = getattr(run, action)(*args)
        except REFUSALS:
            event(f"{action} refused")
            assert self.packet == before
            assert len(self.store.events(self.run_id)) == before_events
            return None
        after = self.packet
        event(f"{action} reached {after.state}")
        assert after.version == before.version + 1
        if action == "ready":
            assert not before.open_blockers, "ready succeeded with an open blocker"
        packet: Packet = result[0] if isinstance(result, tuple) else result
        assert packet == after
        return after

    @rule(actor=ACTORS)
    def claim(self, actor: str) -> None:
        self.attempt(actor, "claim")

    @rule(actor=ACTORS, note=st.none() | st.text(max_size=20))
    def heartbeat(self, actor: str, note: str | None) -> None:
        self.attempt(actor, "heartbeat", note)

    @rule(actor=ACTORS, kind=st.sampled_from(list(BlockerKind)),
          detail=st.sampled_from(["API key for staging", "waiting", " ", "", "", "stuck"]))
    def block(self, actor: str, kind: BlockerKind, detail: str) -> None:
        self.attempt(actor, "block", kind, detail)

    @rule(actor=ACTORS, index=st.integers(1, 4))
    def unblock(self, actor: str, index: int) -> None:
        self.attempt(actor, "unblock", f"b{index}", "resolved")

    @precondition(lambda self: bool(self.packet.open_blockers))
    @rule(actor=ACTORS)
    def resolve_the_first_open_blocker(self, actor: str) -> None:
        self.attempt(actor, "unblock", self.packet.open_blockers[0].id, "resolved")

    @precondition(lambda self: self.packet.state is State.READY_FOR_REVIEW)
    @rule(actor=ACTORS)
    def review_then_approve(self, actor: str) -> None:
        if self.attempt(actor, "review") is not None:
            self.attempt(actor, "approve")

    @rule(actor=ACTORS)
    def skip_evidence(self, actor: str) -> None:
        self.attempt(actor, "skip_evidence", EvidenceKind.TEST, "no runner available")

    @rule(actor=ACTORS, name=st.sampled_from(["a.md", "b.md"]))
    def artifact(self, actor: str, name: str) -> None:
        self.attempt(actor, "record_artifact", Artifact(
            name=name, role=ArtifactRole.REPORT, url=f"https://example.invalid/{name}",
            recorded_at=self.clock(), recorded_by=actor))

    @rule(actor=ACTORS, names=st.lists(st.sampled_from(["a.md", "b.md"]), max_size=2))
    def ready(self, actor: str, names: list[str]) -> None:
        self.attempt(actor, "ready", "done", None, names)

    @rule(actor=ACTORS)
    def changes(self, actor: str) -> None:
        self.attempt(actor, "changes", "more tests please")

    @rule(actor=ACTORS)
    def review(self, actor: str) -> None:
        self.attempt(actor, "review")

    @rule(actor=ACTORS)
    def approve(self, actor: str) -> None:
        self.attempt(actor, "approve")

    @rule(actor=ACTORS, reason=st.sampled_from(["", " ", "", "stopped"]))
    def cancel(self, actor: str, reason: str) -> None:
        self.attempt(actor, "cancel", reason)  # mostly refused: terminal states end a case

    @invariant()
    def terminal_states_never_change(self) -> None:
        state = self.packet.state
        if self.seen_terminal is not None:
            assert state is self.seen_terminal
        if state in TERMINAL:
            self.seen_terminal = state

    @invariant()
    def blocked_exactly_when_a_blocker_is_open(self) -> None:
        packet = self.packet
        if packet.state is State.BLOCKED:
            assert packet.open_blockers
        if packet.open_blockers:  # a cancelled run keeps its blockers on the record
            assert packet.state in (State.BLOCKED, State.CANCELLED)

    @invariant()
    def packet_is_the_fold_of_its_events(self) -> None:
        events = self.store.events(self.run_id)
        packet = self.packet
        assert packet.version == len(events)
        assert fold(events) == packet
        verify_run(self.run_id, events, packet)


PacketMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_packet_machine = PacketMachine.TestCase
