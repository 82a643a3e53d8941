"""Use cases: a `Run` handle that owns every verb that happens to a run once it is started
(`waypost.usecases.starting`): the worker's (claim, heartbeat, block, artifacts, evidence
and checks, ready, resume) and the owner's (review, approve, changes, transfer, cancel;
adding and adopting gates, which the worker may add too).

Every write goes the same way: read the packet, build one event, `apply` it (the rules),
and commit event + packet with the version guard. A version conflict re-reads and
re-decides (`store.base.retry_conflicts`), so concurrent heartbeats never lose each other.
The modules behind the verbs (artifacts, evidence, checks, review, handoff) import nothing
from here, and load when their verb is first called.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from waypost import inputs
from waypost.config import Config
from waypost.core.authority import (
    check_may_resolve,
    check_may_review,
    check_may_take_lease,
    ended_by_takeover,
)
from waypost.core.due import lease_until
from waypost.core.history import prepare
from waypost.core.machine import next_blocker_id, next_evidence_id
from waypost.core.writes import RunWrite, Snapshot
from waypost.durations import MAX_DURATION, Clock, utcnow
from waypost.errors import InvalidInput, NotFound, VersionConflict, WaypostError, step
from waypost.events import (
    AnyEventData,
    ArtifactRecorded,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    Claimed,
    EvidenceRecorded,
    Heartbeat,
    MarkedReady,
)
from waypost.model import (
    TERMINAL,
    Artifact,
    ArtifactRole,
    Assurance,
    Authority,
    BlockerKind,
    Evidence,
    EvidenceKind,
    Packet,
    Verdict,
    Waiver,
    to_json,
)
from waypost.store.base import Store, retry_conflicts
from waypost.usecases.fields import checked_text

if TYPE_CHECKING:
    from waypost.usecases.evidence import CheckResult
    from waypost.usecases.handoff import Brief
    from waypost.usecases.review import ReviewReport


def _jitter(attempt: int) -> None:
    """A short random pause after a conflict, longer as they repeat, so racing writers part."""
    import random  # only after a conflict: the CLI's hot verbs do not pay for it

    time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))


class Run:
    """A handle on one run, acting as `actor` (a worker passes its lease `epoch`)."""

    def __init__(self, store: Store, run_id: str, *, actor: str, epoch: int | None = None,
                 clock: Clock = utcnow, expected_version: int | None = None) -> None:
        self.store = store
        self.id = run_id
        self.actor = inputs.name(actor, "actor")
        self.epoch = None if epoch is None else inputs.epoch(epoch)
        self.clock = clock
        self.expected_version = expected_version
        self._last: Snapshot | None = None  # what this handle committed last

    def __repr__(self) -> str:
        return f"Run({self.id!r}, actor={self.actor!r}, epoch={self.epoch!r})"

    @property
    def packet(self) -> Packet:
        return self.store.get(self.id)

    def write(self, build: Callable[[Packet], AnyEventData]) -> Packet:
        """The one write path: build an event from the current packet, apply, commit.

        The packet this handle committed last is reused instead of read again (a worker's
        next heartbeat skips a read): if anything changed since, the version guard refuses
        the commit, and a refusal or a broken rule is decided again on a fresh read.
        With `expected_version`, a packet at another version is a VersionConflict.
        """
        snap, self._last = self._last, None
        if snap is not None and self.expected_version is None:
            try:
                decided: RunWrite | None = self._decide(snap, build)
            except WaypostError:
                decided = None  # a packet that has changed since: decide on a fresh read
            if decided is not None:
                try:
                    return self._commit(decided)
                except VersionConflict:
                    pass  # another write came first: decide again on a fresh read
        if self.expected_version is not None:
            return self._commit(self._decide(self.store.load(self.id), build))
        return retry_conflicts(
            lambda: self._commit(self._decide(self.store.load(self.id), build)),
            what=f"run {self.id}", pause=_jitter)

    def precheck(self, build: Callable[[Packet], AnyEventData]) -> Packet:
        """Decide a write now without committing it: the rules (state, authority, lease
        epoch, the event's own checks) raise here exactly as they would on commit. An edge
        calls this before it does anything with a cost or a trace (runs a command, stores a
        blob), so a refusal leaves none; the commit still decides again under the version
        guard. Returns the packet the check was made against."""
        snap = self.store.load(self.id)
        self._decide(snap, build)
        return snap.packet

    def _decide(self, snap: Snapshot, build: Callable[[Packet], AnyEventData]) -> RunWrite:
        if self.expected_version not in (None, snap.packet.version):
            raise VersionConflict(
                f"run {self.id} is at version {snap.packet.version}, not {self.expected_version}",
                steps=[step("read", self.id, why="read it again")],
            )
        return prepare(snap, [(build(snap.packet), self.epoch)], actor=self.actor,
                       at=self.clock())

    def _commit(self, write: RunWrite) -> Packet:
        self.store.commit_write(write)
        head = write.events[-1]  # the next write chains to it without reading it again
        self._last = Snapshot.chained(write.packet, head.hash, to_json(head))
        return write.packet

    # --- the worker's verbs -----------------------------------------------------------

    def claim(self) -> Packet:
        """Take (or take over) the lease: epoch + 1 fences the old holder; a live lease is
        the owner's or its nominee's to take (`check_may_take_lease`); a run blocked as
        silent is taken as `resume` takes it (`core.authority.ended_by_takeover`)."""

        def build(p: Packet) -> Claimed:
            check_may_take_lease(p, self.actor, self.clock())
            holder = p.worker.actor if p.worker and p.worker.actor != self.actor else None
            return Claimed(epoch=(p.worker.epoch if p.worker else 0) + 1,
                           lease_expires_at=lease_until(p.stop_rules, self.clock()),
                           took_over_from=holder)

        def attempt() -> Packet:
            snap = self.store.load(self.id)
            write = self._decide(snap, build)  # the version and the takeover rule
            if ended_by_takeover(snap.packet):
                from waypost.usecases import handoff  # only a silent run's claim needs it
                write = handoff.takeover(snap, self.actor, self.clock(), verb="claimed")
            return self._commit(write)

        self.epoch = None
        packet = attempt() if self.expected_version is not None else retry_conflicts(
            attempt, what=f"run {self.id}: claiming", pause=_jitter)
        assert packet.worker is not None
        self.epoch = packet.worker.epoch
        return packet

    def heartbeat(self, note: str | None = None, progress: float | None = None) -> Packet:
        if note is not None:
            checked_text(self.store, note, "note", required=False)
        if progress is not None:
            progress = inputs.fraction(progress)
        return self.write(lambda p: Heartbeat(
            note=note, fraction=progress,
            lease_expires_at=lease_until(p.stop_rules, self.clock())))

    def block(self, kind: BlockerKind, detail: str) -> tuple[Packet, str]:
        checked_text(self.store, detail, "detail")
        ids: list[str] = []

        def build(p: Packet) -> BlockerOpened:
            ids[:] = [next_blocker_id(p)]
            return BlockerOpened(blocker_id=ids[0], kind=kind, detail=detail)

        packet = self.write(build)
        return packet, ids[0]

    def unblock(self, blocker_id: str, resolution: str) -> Packet:
        """Resolve a blocker, as the table says who may (`check_may_resolve`: the worker
        its own kinds, the owner any); the rules of `apply` decide the rest."""
        checked_text(self.store, resolution, "resolution")

        def build(p: Packet) -> BlockerResolved:
            found = next((b for b in p.blockers if b.id == blocker_id), None)
            # a missing blocker is named before the state's rules, unless the run is final
            if p.state not in TERMINAL and found is None:
                known = ", ".join(b.id for b in p.open_blockers) or "none"
                raise NotFound(f"run {p.id} has no blocker {blocker_id} (open: {known})",
                               steps=[step("read", p.id, why="see its blockers")])
            if found is not None:
                check_may_resolve(p, self.actor, found)
            return BlockerResolved(blocker_id=blocker_id, resolution=resolution)

        return self.write(build)

    def add_artifact(self, source: str, *, role: ArtifactRole, name: str | None = None,
                     max_bytes: int) -> Packet:
        """Record `source`: a file (copied into the store, at most `max_bytes`) or an
        http(s) URL (a reference).

        Decided before anything is stored: the name, the file (a regular file, opened once),
        its size and the run's rules (state, authority, lease epoch); only then are the bytes
        read (counted, whatever size the file reports) and stored. The rules do not look at
        the bytes, so they are checked on the record before its digest is known."""
        from waypost.usecases import artifacts

        with artifacts.open_source(source, role=role, name=name, max_bytes=max_bytes,
                                   at=self.clock(), by=self.actor) as decided:
            self.precheck(lambda p: ArtifactRecorded(artifact=decided.record))
            artifact = artifacts.read_and_store(self.store, decided, max_bytes)
        return self.record_artifact(artifact)

    def add_artifact_bytes(self, name: str, chunks: Iterable[bytes], *, role: ArtifactRole,
                           max_bytes: int, media_type: str | None = None,
                           size: int | None = None) -> Packet:
        """Record bytes sent from elsewhere (an upload, inline content, a program's output)
        as the artifact `name`: the name, media type, declared `size` and the run's rules
        (state, authority, lease) are decided before a chunk is read; the chunks are then
        counted (refused past `max_bytes`), stored as one blob and recorded. A refusal
        stores no blob and writes no event."""
        from waypost.usecases import artifacts

        record = artifacts.sent_record(name, role=role, media_type=media_type, size=size,
                                       max_bytes=max_bytes, at=self.clock(), by=self.actor)
        self.precheck(lambda p: ArtifactRecorded(artifact=record))
        return self.record_artifact(artifacts.store_chunks(self.store, record, chunks,
                                                           max_bytes))

    def record_artifact(self, artifact: Artifact) -> Packet:
        return self.write(lambda p: ArtifactRecorded(artifact=artifact))

    def artifact(self, name: str) -> tuple[Artifact, bytes]:
        """A stored artifact's record and bytes, checked against its sha256."""
        from waypost.usecases import artifacts

        return artifacts.fetch(self.store, self.id, name)

    def record_evidence(
        self, *, kind: EvidenceKind, verdict: Verdict, assurance: Assurance, summary: str,
        command: str | None = None, cwd: str | None = None, exit_code: int | None = None,
        duration_s: float | None = None, output_tail: str | None = None,
        log_sha256: str | None = None, reason: str | None = None,
        artifacts: Sequence[str] = (), gate: str | None = None,
    ) -> Packet:
        def build(p: Packet) -> EvidenceRecorded:
            return EvidenceRecorded(evidence=Evidence(
                id=next_evidence_id(p), kind=kind, verdict=verdict, assurance=assurance,
                summary=summary, command=command, cwd=cwd, exit_code=exit_code,
                duration_s=duration_s, output_tail=output_tail, log_sha256=log_sha256,
                reason=reason, artifacts=tuple(artifacts), gate=gate,
                recorded_at=self.clock(), recorded_by=self.actor))

        return self.write(build)

    def record_result(self, found: CheckResult, *, assurance: Assurance = Assurance.RECORDED,
                      gate: str | None = None) -> Packet:
        """Record what a command or check found as evidence (`recorded`: waypost ran it)."""
        from waypost.usecases.evidence import to_evidence

        return self.write(lambda p: EvidenceRecorded(evidence=to_evidence(
            found, id=next_evidence_id(p), assurance=assurance, at=self.clock(),
            by=self.actor, gate=gate)))

    def record_command(self, argv: Sequence[str], *, kind: EvidenceKind = EvidenceKind.COMMAND,
                       cwd: str | None = None, timeout: float = 3600.0,
                       tail_bytes: int = 4096, echo: Callable[[bytes], None] | None = None,
                       gate: str | None = None,
                       assurance: Assurance = Assurance.RECORDED,
                       max_output: int | None = None,
                       heartbeat_every: float | None = None) -> Packet:
        """Run the command and record what happened (exit code, time, output tail, log).
        Decided first: a run that would refuse the record runs nothing.

        While it runs, the lease holder's heartbeat is sent for it (`waypost.usecases.beats`: every
        `heartbeat_every` seconds, default from the stop rules), so a long test suite does
        not make the worker look silent. A refused beat (the lease was taken over) stops
        the beats but not the command: it finishes, and its record is then refused as any
        fenced write is (StaleLease), its output kept in the store as a blob."""
        from waypost.system.process import Tick
        from waypost.usecases.beats import Beats, beat_every
        from waypost.usecases.evidence import MAX_OUTPUT_BYTES, command_result

        if not argv:
            raise InvalidInput("no command to run", steps=[step("evidence", self.id)])
        inputs.utf8(list(argv), "command argument")
        inputs.finite(timeout, "timeout", low=0.001, high=MAX_DURATION)
        packet = self.precheck(self._evidence_probe)
        holder = packet.worker is not None and packet.worker.actor == self.actor
        every = beat_every(packet.stop_rules) if heartbeat_every is None else heartbeat_every
        tick = Tick(call=Beats(self.heartbeat), every=every) if holder else None
        found = command_result(argv, store=self.store, kind=kind, cwd=cwd, timeout=timeout,
                               tail_bytes=tail_bytes, echo=echo, tick=tick,
                               max_output=MAX_OUTPUT_BYTES if max_output is None else max_output)
        return self.record_result(found, assurance=assurance, gate=gate)

    def check(self, spec: str, *, config: Config | None = None, cwd: str | None = None,
              files: bool = True) -> Packet:
        """Run a built-in check (`KIND:ARG`) now and record what it found (`files`: whether
        it may look at this machine's files, `checks.Context`)."""
        from waypost.usecases import checks

        check = checks.parse_check(spec)
        packet = self.precheck(self._evidence_probe)  # a refused record runs no check
        ctx = checks.Context(store=self.store, packet=packet, config=config or Config(),
                             cwd=cwd, files=files)
        return self.record_result(checks.run_check(check, ctx))

    def _evidence_probe(self, packet: Packet) -> EvidenceRecorded:
        """The evidence record that a command or check would make, as far as the rules care
        (who records it, on which run, in which state, under which lease)."""
        return EvidenceRecorded(evidence=Evidence(
            id=next_evidence_id(packet), kind=EvidenceKind.COMMAND, verdict=Verdict.FAILED,
            assurance=Assurance.RECORDED, summary="not run yet", recorded_at=self.clock(),
            recorded_by=self.actor))

    def skip_evidence(self, kind: EvidenceKind, reason: str) -> Packet:
        """A check that could not run, with the named reason (never fake confidence)."""
        checked_text(self.store, reason, "reason")
        return self.record_evidence(kind=kind, verdict=Verdict.SKIPPED,
                                    assurance=Assurance.REPORTED,
                                    summary=f"skipped: {reason}", reason=reason)

    def report_evidence(self, kind: EvidenceKind, verdict: Verdict, summary: str) -> Packet:
        """A claim typed by hand: shown as `reported`, never as `recorded`."""
        checked_text(self.store, summary, "summary")
        return self.record_evidence(kind=kind, verdict=verdict, assurance=Assurance.REPORTED,
                                    summary=summary)

    def ready(self, summary: str, public_summary: str | None = None,
              artifacts: Sequence[str] = (), config: Config | None = None) -> Packet:
        """Submit the result; an artifact it names must hold substantive content."""
        checked_text(self.store, summary, "summary")
        if public_summary is not None:
            checked_text(self.store, public_summary, "public_summary", required=False)
        if artifacts:
            from waypost.usecases.substance import require_substantive

            require_substantive(self.store, self.packet, artifacts, config or Config())
        return self.write(lambda p: MarkedReady(summary=summary, public_summary=public_summary,
                                                artifacts=tuple(artifacts)))

    def resume(self) -> Brief:
        """Take over the lease as this handle's actor, as claim does (`handoff.takeover`:
        the old worker fenced, `worker_silent` resolved), and return the handoff brief."""
        from waypost.usecases import handoff

        def attempt() -> Packet:
            snap, at = self.store.load(self.id), self.clock()
            handoff.check_may_resume(snap.packet, self.actor)
            check_may_take_lease(snap.packet, self.actor, at)
            return self._commit(handoff.takeover(snap, self.actor, at))

        packet = retry_conflicts(attempt, what=f"run {self.id}: resuming")
        assert packet.worker is not None
        self.epoch = packet.worker.epoch
        return handoff.brief(packet, self.store.events(self.id))

    # --- the owner's verbs ------------------------------------------------------------

    def review(self, *, config: Config | None = None, cwd: str | None = None,
               files: bool = True) -> tuple[Packet, ReviewReport]:
        """Run every gate now, in this process's environment, and record the verdicts as
        `rechecked` evidence (owner, or a holder of the approve authority); `files` as
        for `check`."""
        from waypost.usecases import review

        packet = review.writable(self.store, self.id)
        check_may_review(packet, self.actor)  # before any gate runs a command
        measured = review.measure(self.store, packet, config or Config(), cwd, files)
        packet = self.write(lambda p: review.reviewed(p, measured, at=self.clock(),
                                                      by=self.actor))
        return packet, review.report(packet)

    def add_gate(self, name: str, check: str, *, required: bool = True) -> Packet:
        """Declare another gate (`waypost.usecases.gates`): the owner's runs at review; the
        worker's (before ready) is shown as the worker's and runs once the owner adopts it."""
        from waypost.usecases import gates

        gate = gates.decide_added(name, check, required=required)
        return self.write(lambda p: gates.added(p, gate))

    def adopt_gate(self, name: str) -> Packet:
        """Owner: make a gate someone else declared the owner's own, so review runs it."""
        from waypost.usecases import gates

        return self.write(lambda p: gates.adopted(p, name, self.actor))

    def changes(self, reason: str, *, reviewed: str | None = None) -> Packet:
        """Send the result back; `reviewed`: its digest, as in `approve`."""
        from waypost.usecases import approval

        checked_text(self.store, reason, "reason")
        digest = approval.given(reviewed)
        return self.write(lambda p: approval.changes_requested(self, p, reason, digest))

    def transfer(self, authority: Authority, to: str) -> Packet:
        inputs.name(to, "--to")
        return self.write(lambda p: AuthorityTransferred(authority=authority, to=to))

    def approve(self, waivers: Mapping[str, str] | None = None, *,
                reviewed: str | None = None, statement: str | None = None) -> Packet:
        """Accept the result (owner or transferee); `reviewed`: its digest (`approval`)."""
        from waypost.usecases import approval

        for reason in (waivers or {}).values():
            checked_text(self.store, reason, "reason")
        digest, now = approval.given(reviewed), self.clock()
        given = tuple(Waiver(gate=g, reason=r, by=self.actor, at=now)
                      for g, r in (waivers or {}).items())
        return self.write(lambda p: approval.approved(self, p, given, digest, statement))

    def cancel(self, reason: str) -> Packet:
        checked_text(self.store, reason, "reason")
        return self.write(lambda p: Cancelled(reason=reason))

    def retarget(self, target: str | None = None, notify: str | None = None,
                 accept_duplicate: bool = False, *, config: Config | None = None) -> Packet:
        """Owner: send the result (`target`) or the notices (`notify`) elsewhere, before
        delivery; the URIs are decided as `start` decides them. A run blocked by its failed
        final delivery has that blocker resolved in the same write: the same delivery is
        queued again to the new target. Refused (Conflict) while a relay is sending it, and
        (RuleViolation) when an earlier attempt's outcome is unknown, unless
        `accept_duplicate`: the old target may already have the result."""
        from waypost.usecases import retarget

        retarget.check_uris(self.store, config or Config(), self.id, target, notify)

        def attempt() -> Packet:
            return self._commit(retarget.decide(
                self.store, self.store.load(self.id), actor=self.actor, at=self.clock(),
                target=target, notify=notify, accept_duplicate=accept_duplicate))

        return retry_conflicts(attempt, what=f"run {self.id}: retargeting", pause=_jitter)

