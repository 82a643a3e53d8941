"""Every operation the API (and the board's owner actions) offers, as a function of the
store, the caller's grant and the server's settings: decide the role (`core.access`),
then call the same use case as the CLI verb, acting as the token's holder. Nothing here is
a rule of its own; the HTTP routes only read requests into these calls."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from waypost.config import Config
from waypost.core import access
from waypost.core.access import Caller, Operation
from waypost.durations import utcnow
from waypost.errors import IntegrityError, InvalidInput, NotFound, Refused
from waypost.http import shapes
from waypost.http.settings import ServerConfig
from waypost.model import Artifact, ArtifactRole, Packet
from waypost.store.base import Store
from waypost.usecases import reading, starting
from waypost.usecases.bundles import Served
from waypost.usecases.inbox import Inbox
from waypost.usecases.reading import NO_CONFIG
from waypost.usecases.runs import Run
from waypost.usecases.views import observe_run

MAX_PAGE = 500  # rows one page of runs or events holds at most


def handle(store: Store, caller: Caller, run_id: str, operation: Operation, *,
           epoch: int | None = None, blocker: str | None = None) -> Run:
    """A handle on the run acting as the token's holder, once its role allows `operation`
    there (the run's rules decide the rest, as for any actor)."""
    packet = store.get(run_id)
    access.check_operation(caller, operation, packet, blocker=blocker)
    return Run(store, packet.id, actor=caller.holder, epoch=epoch)


def moved(store: Store, packet: Packet, *, epoch: int | None = None,
          blocker: str | None = None) -> shapes.Moved:
    return shapes.Moved(run=packet.id, state=packet.state, version=packet.version,
                        epoch=epoch, blocker=blocker, packet=observe_run(store, packet))


# --- reads ------------------------------------------------------------------------------


def list_runs(store: Store, caller: Caller, *, states: Sequence[str] = (),
              owner: str | None = None, cursor: str | None = None,
              limit: int = 100, project: Config = NO_CONFIG) -> shapes.RunPage:
    """Runs newest first (by id, which is the start order, so a page never repeats or skips
    a run that changed meanwhile); `cursor` is the last id of the page before. A page reads
    its own rows (`Store.runs_page`), however many runs are stored."""
    from waypost.model import parse_states

    access.check_operation(caller, Operation.LIST)
    wanted = parse_states(states) or None
    if caller.run_id is not None:  # a run's token lists that run alone
        packets = [p for p in _readable(store, [caller.run_id])
                   if (wanted is None or p.state in wanted) and owner in (None, p.owner)
                   and (cursor is None or p.id < cursor)]
    else:
        packets = store.runs_page(before=cursor, limit=limit + 1, states=wanted, owner=owner)
    page, more = packets[:limit], len(packets) > limit
    return shapes.RunPage(runs=reading.runs(store, caller, page, config=project, now=utcnow()),
                          next_cursor=page[-1].id if more and page else None)


def inbox(store: Store, caller: Caller, *, ack: bool, project: Config = NO_CONFIG) -> Inbox:
    """The token holder's inbox (the runs it owns that its token may read); with `ack`,
    acknowledged as listed."""
    from waypost.usecases import inbox as inboxes

    access.check_operation(caller, Operation.LIST)
    return inboxes.read(store, caller.holder, ack=ack, caller=caller, config=project)


def _readable(store: Store, ids: Sequence[str]) -> list[Packet]:
    """The packets of `ids`; one that does not read (see `waypost doctor`) is left out, as
    the store's own listing leaves it out, never hiding the others."""
    found = []
    for run_id in ids:
        try:
            found.append(store.get(run_id))
        except (NotFound, IntegrityError):
            continue
    return found


def show(store: Store, caller: Caller, run_id: str, *,
         project: Config = NO_CONFIG) -> Packet:
    """The run as the caller may see it (`usecases.reading`: the read model)."""
    return reading.run(store, caller, run_id, config=project)


async def show_when_needed(store: Store, caller: Caller, run_id: str, wait: str, *,
                           project: Config = NO_CONFIG) -> tuple[Packet, str]:
    """A long poll: the run as the caller may see it once it needs the parent, or once
    `wait` (at most `waiting.HTTP_WAIT_S`) has passed; and how the wait ended. The caller's
    right to read the run is decided first; the wait holds no thread."""
    import anyio.to_thread

    from waypost.usecases import waiting

    seconds = waiting.wait_seconds(wait, "wait", default=0.0, cap=waiting.HTTP_WAIT_S)
    await anyio.to_thread.run_sync(lambda: reading.readable(store, caller, run_id))
    waited = await waiting.await_runs(store, [run_id], call=anyio.to_thread.run_sync,
                                      timeout=seconds)
    packet = await anyio.to_thread.run_sync(
        lambda: reading.run(store, caller, run_id, config=project))
    return packet, str(waited.outcome)


def events(store: Store, caller: Caller, run_id: str, *, after: int = 0,
           limit: int = 100, project: Config = NO_CONFIG) -> shapes.EventPage:
    found = [e for e in reading.events(store, caller, run_id, config=project)
             if e.seq > after]
    page = found[:limit]
    return shapes.EventPage(events=page,
                            next_cursor=page[-1].seq if len(found) > limit else None)


def bundle(store: Store, caller: Caller, config: ServerConfig, run_id: str,
           folder: str) -> Served:
    """What `GET /api/runs/{id}/bundle` serves `caller`, signed by the server's key."""
    from waypost.usecases import bundles, keys

    def signer() -> keys.Signer:
        if config.signing_key_file is None and config.signing_key_env is None:
            raise Refused("this server holds no signing key, so it signs no bundle",
                          hint="start it with: waypost serve --key-file FILE (a key of "
                          "waypost keys generate)")
        return keys.load_signer(store, path=config.signing_key_file,
                                env=config.signing_key_env)

    return bundles.for_reader(store, caller, run_id, signer, folder,
                              deny=config.project.deny, allow=config.project.allow)


def verify(store: Store, caller: Caller, run_id: str) -> shapes.Verified:
    from waypost.core.history import verify_run

    packet = reading.readable(store, caller, run_id)
    try:
        verify_run(run_id, store.events(run_id), store.get(run_id))
    except IntegrityError as exc:
        return shapes.Verified(run=packet.id, ok=False, problem=exc.message)
    return shapes.Verified(run=packet.id, ok=True)


def artifact(store: Store, caller: Caller, run_id: str, name: str) -> tuple[Artifact, bytes]:
    """The stored bytes, for a reader who sees everything of the run (`usecases.reading`)."""
    return reading.artifact(store, caller, run_id, name)


# --- start ------------------------------------------------------------------------------


def start(store: Store, caller: Caller, config: ServerConfig, body: shapes.StartBody,
          idempotency_key: str | None) -> shapes.Started:
    spec = starting.start_spec(
        body.title, owner=body.owner or caller.holder, target=body.target,
        notify=body.notify, kind=body.kind, expect=body.expect, deadline=body.deadline,
        heartbeat_interval=body.heartbeat_interval, max_silence=body.max_silence,
        review_within=body.review_within, gates=body.gates, worker=body.worker,
        idempotency_key=idempotency_key, session=body.session, config=config.project)
    access.check_operation(caller, Operation.START, owner=body.owner)
    config.exposure.check_start(target=spec.target, notify=spec.notify, gates=spec.gates)
    run, created = starting.start(store, spec, actor=caller.holder, config=config.project)
    packet = run.packet
    return shapes.Started(run=packet.id, created=created, packet=observe_run(store, packet))


# --- the worker's ---------------------------------------------------------------------------


def claim(store: Store, caller: Caller, run_id: str) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.CLAIM)
    packet = run.claim()
    return moved(store, packet, epoch=run.epoch)


def resume(store: Store, caller: Caller, run_id: str) -> shapes.Resumed:
    run = handle(store, caller, run_id, Operation.RESUME)
    found = run.resume()
    return shapes.Resumed(run=run_id, epoch=found.epoch, brief=found)


def heartbeat(store: Store, caller: Caller, run_id: str,
              body: shapes.HeartbeatBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.HEARTBEAT, epoch=body.epoch)
    return moved(store, run.heartbeat(note=body.note, progress=body.progress))


def block(store: Store, caller: Caller, run_id: str, body: shapes.BlockBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.BLOCK, epoch=body.epoch)
    packet, blocker = run.block(body.kind, body.detail)
    return moved(store, packet, blocker=blocker)


def unblock(store: Store, caller: Caller, run_id: str,
            body: shapes.UnblockBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.UNBLOCK, epoch=body.epoch,
                 blocker=body.blocker)
    return moved(store, run.unblock(body.blocker, body.resolution))


def add_artifact(store: Store, caller: Caller, run_id: str, *, name: str, role: ArtifactRole,
                 epoch: int | None, chunks: Iterable[bytes], size: int | None,
                 max_bytes: int) -> shapes.Artifacted:
    """Record bytes sent over HTTP (`Run.add_artifact_bytes`: decided, then counted)."""
    run = handle(store, caller, run_id, Operation.ARTIFACT, epoch=epoch)
    packet = run.add_artifact_bytes(name, chunks, role=role, max_bytes=max_bytes, size=size)
    record = packet.artifact(name)
    assert record is not None
    return shapes.Artifacted(run=run_id, name=record.name, role=record.role,
                             sha256=record.sha256 or "", bytes=record.bytes or 0,
                             version=packet.version)


def evidence(store: Store, caller: Caller, config: ServerConfig, run_id: str,
             body: shapes.EvidenceBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.EVIDENCE, epoch=body.epoch)
    given = [f for f in ("check", "argv", "reason", "verdict")
             if getattr(body, f) is not None]
    if len(given) != 1:
        raise InvalidInput("evidence takes one of: check, argv, reason, verdict (with "
                           f"summary); got {', '.join(given) or 'none'}",
                           hint='e.g. {"check": "artifact:report.md"}')
    exposure = config.exposure
    if body.check is not None:
        exposure.check_check(body.check, run.packet)
        return moved(store, run.check(body.check, config=config.project,
                                      files=exposure.reads_files))
    if body.argv is not None:
        exposure.check_command(shlex.join(body.argv))
        return moved(store, run.record_command(
            body.argv, kind=body.kind, timeout=config.project.evidence_timeout,
            tail_bytes=config.project.output_tail_bytes,
            max_output=config.project.max_output_bytes))
    if body.reason is not None:
        return moved(store, run.skip_evidence(body.kind, body.reason))
    assert body.verdict is not None
    if body.summary is None:
        raise InvalidInput("a reported verdict needs a summary",
                           hint='e.g. {"verdict": "passed", "summary": "42 tests pass"}')
    return moved(store, run.report_evidence(body.kind, body.verdict, body.summary))


def ready(store: Store, caller: Caller, config: ServerConfig, run_id: str,
          body: shapes.ReadyBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.READY, epoch=body.epoch)
    return moved(store, run.ready(body.summary, body.public_summary, body.artifacts,
                                  config=config.project))


def add_gate(store: Store, caller: Caller, config: ServerConfig, run_id: str,
             body: shapes.GateBody) -> shapes.Moved:
    """Another gate; an http: check reaches only a listed host (as at start). A command
    is recorded, never run here: the owner's review runs it once it is the owner's."""
    run = handle(store, caller, run_id, Operation.ADD_GATE, epoch=body.epoch)
    config.exposure.check_gate(body.name, body.check)
    return moved(store, run.add_gate(body.name, body.check, required=body.required))


# --- the owner's ------------------------------------------------------------------------


def adopt_gate(store: Store, caller: Caller, run_id: str, body: shapes.AdoptBody) -> shapes.Moved:
    return moved(store, handle(store, caller, run_id, Operation.ADOPT_GATE).adopt_gate(body.name))


def review(store: Store, caller: Caller, config: ServerConfig, run_id: str) -> shapes.Reviewed:
    run = handle(store, caller, run_id, Operation.REVIEW)
    config.exposure.check_review(run.packet)
    packet, report = run.review(config=config.project, files=config.exposure.reads_files)
    return shapes.Reviewed(run=run_id, review=report.review, approvable=report.approvable,
                           gates=list(report.gates), packet=observe_run(store, packet),
                           reviewed=report.reviewed)


def approve(store: Store, caller: Caller, run_id: str, body: shapes.ApproveBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.APPROVE)
    return moved(store, run.approve(body.waivers, reviewed=body.reviewed))


def changes(store: Store, caller: Caller, run_id: str, body: shapes.ChangesBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.CHANGES)
    return moved(store, run.changes(body.reason, reviewed=body.reviewed))


def transfer(store: Store, caller: Caller, run_id: str,
             body: shapes.TransferBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.TRANSFER)
    return moved(store, run.transfer(body.authority, body.to))


def cancel(store: Store, caller: Caller, run_id: str, body: shapes.ReasonBody) -> shapes.Moved:
    return moved(store, handle(store, caller, run_id, Operation.CANCEL).cancel(body.reason))


def retarget(store: Store, caller: Caller, config: ServerConfig, run_id: str,
             body: shapes.RetargetBody) -> shapes.Moved:
    run = handle(store, caller, run_id, Operation.RETARGET)
    config.exposure.check_targets(target=body.target, notify=body.notify)
    return moved(store, run.retarget(body.target, body.notify, body.accept_duplicate,
                                     config=config.project))


def a2a_task(store: Store, caller: Caller, run_id: str, *,
             project: Config = NO_CONFIG) -> shapes.A2ATask:
    from waypost.usecases import a2a

    return a2a.task(show(store, caller, run_id, project=project))

