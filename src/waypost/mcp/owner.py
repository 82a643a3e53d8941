"""The owner's tools: review (re-run the owner's gates here), approve, request_changes,
transfer (hand an authority over), cancel, retarget, checkpoint_wait (until runs need
the parent), and inbox (what happened on the runs one owns). The rules decide who may (the
owner, or whom the owner transferred the authority to); a server started for anyone else
gets the refusal every door gives, naming who may and the tool to call next."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from mcp.server import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from waypost import errors, model
from waypost.config import Config
from waypost.core.gates import runs_at_review
from waypost.core.reviewed import short
from waypost.core.targets import FORMS
from waypost.mcp.answers import add_tools, answer, answer_async, as_json, next_call, then_call
from waypost.mcp.session import Session
from waypost.mcp.shapes import (
    TEXT_CEILING,
    ActorName,
    Approved,
    AuthorityName,
    Inboxed,
    Moved,
    Retargeted,
    Reviewed,
    RunId,
    StateName,
    Waited,
)

Reason = Annotated[str, Field(min_length=1, max_length=TEXT_CEILING)]
Digest = Annotated[str | None, Field(max_length=80, description=(
    "The reviewed-result digest of the result you answer (`reviewed` in review's answer, "
    "sha256:… or its first 12 hex digits): refused (result_changed, saying what changed) if "
    "the result has changed since. Without it, the result as it stands is answered."))]


def register(server: MCPServer, session: Session) -> None:
    add_tools(server, (_review(session), _approve(session), _changes(session),
                       _transfer(session), _cancel(session), _retarget(session),
                       _wait(session), _inbox(session)))


def bounded(session: Session, packet: model.Packet) -> Config:
    """The config a review runs its gates under here: the gates that run a command or reach
    a URL share the tool's time limit, so the call answers within it (a gate cut short is
    recorded as failed, with the reason; `waypost review` in a shell has no such limit)."""
    slow = sum(1 for g in packet.gates if runs_at_review(packet, g)
               and g.check.strip().startswith(("command:", "http:")))
    share = session.evidence_limit / max(slow, 1)
    return msgspec.structs.replace(
        session.config, evidence_timeout=min(session.config.evidence_timeout, share))


def _review(session: Session) -> Any:
    def review(run: RunId) -> Annotated[CallToolResult, Reviewed]:
        """Owner: re-run every gate of a ready_for_review run here, re-verify its
        artifacts, and record each verdict as rechecked evidence. A command, URL or file
        gate someone else declared is recorded as not run until you adopt_gate it (it
        blocks approval until then, unless waived). Gates that run commands
        share this server's time limit (default 20 s): one cut short fails, and the owner
        re-runs `waypost review RUN` in a shell. Returns whether it is
        approvable and each gate's verdict. Next: approve if approvable; else
        request_changes with the reasons (or approve with waivers, owner only)."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                handle = session.run(store, run)
                packet = store.get(run)
                session.exposure.check_review(packet)
                _, report = handle.review(config=bounded(session, packet),
                                          files=session.exposure.reads_files)
            step = ("approve" if report.approvable else
                    "request_changes with the failed gates, or approve with waivers")
            bound = {"reviewed": short(report.reviewed)} if report.reviewed else {}
            then = ({"next_call": next_call(errors.step("approve", run, actor=session.actor,
                                                        **bound))}
                    if report.approvable else {})
            return {"run": run, "approvable": report.approvable, "report": as_json(report),
                    "reviewed": report.reviewed, "next": step, **then}

        return answer("review", work)

    return review


def _approve(session: Session) -> Any:
    def approve(
        run: RunId,
        waivers: Annotated[dict[str, Reason], Field(max_length=50, description=(
            "Gates accepted although they did not pass: {gate name: reason} (owner only; "
            "shown forever)."))] = {},  # noqa: B006
        reviewed: Digest = None,
    ) -> Annotated[CallToolResult, Approved]:
        """Owner: accept the result after review; the final delivery to the recorded target
        is queued (sent once by `waypost deliver`). Refused unless every required gate
        passed in the latest review or is waived with a reason, and (with `reviewed`)
        unless the result is still the one reviewed. Returns the new state.
        Next: nothing; the delivery relay sends it."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).approve(waivers, reviewed=reviewed)
            return {"run": run, "state": packet.state, "approval": as_json(packet.approval),
                    "next": "nothing: the relay (waypost deliver) sends the result once",
                    **then_call(packet, session.actor)}

        return answer("approve", work)

    return approve


def _changes(session: Session) -> Any:
    def request_changes(run: RunId, reason: Annotated[str, Field(
            min_length=1, max_length=TEXT_CEILING, description="What must change, specifically.")],
        reviewed: Digest = None,
    ) -> Annotated[CallToolResult, Moved]:
        """Owner: send a ready_for_review run back to its worker (in_progress) with the
        reason. Returns the new state. Next: the worker addresses it and calls mark_ready
        again."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).changes(reason, reviewed=reviewed)
            return {"run": run, "state": packet.state, "version": packet.version,
                    "next": "the worker addresses it, then mark_ready again"}

        return answer("request_changes", work)

    return request_changes


def _transfer(session: Session) -> Any:
    def transfer(
        run: RunId,
        authority: Annotated[AuthorityName, Field(description=(
            "approve: they may review and approve the result; deliver: they may deliver "
            "it; takeover: they may claim or resume the run while its worker's lease is "
            "live."))],
        to: Annotated[ActorName, Field(description="The actor who receives it.")],
    ) -> Annotated[CallToolResult, Moved]:
        """Owner: hand one of your authorities on the run to another actor, recorded in
        its history for good (you keep yours). Only the owner may. Returns the state and
        version. Next: tell them; with takeover they call claim (or resume), with approve
        they call review, then approve."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).transfer(model.Authority(authority), to)
            then = ("claim (or resume)" if authority == "takeover" else
                    "review, then approve" if authority == "approve" else "deliver")
            return {"run": run, "state": packet.state, "version": packet.version,
                    "next": f"{to} may now {then}"}

        return answer("transfer", work)

    return transfer


def _cancel(session: Session) -> Any:
    def cancel(run: RunId, reason: Annotated[str, Field(
            min_length=1, max_length=TEXT_CEILING, description="Why the work stops.")],
    ) -> Annotated[CallToolResult, Moved]:
        """Owner: stop a run for good, with the reason (cancelled is final: nothing is
        delivered). Returns the new state. Next: nothing."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                packet = session.run(store, run).cancel(reason)
            return {"run": run, "state": packet.state, "version": packet.version,
                    "next": "nothing: the run is final"}

        return answer("cancel", work)

    return cancel


def _retarget(session: Session) -> Any:
    def retarget(
        run: RunId,
        target: Annotated[str | None, Field(max_length=2_000, description=(
            f"The new final target URI: {FORMS}."))] = None,
        notify: Annotated[str | None, Field(max_length=2_000, description=(
            "The new notify URI."))] = None,
        accept_duplicate: Annotated[bool, Field(description=(
            "Retarget even though an earlier attempt's outcome is unknown (the old target "
            "may already have the result)."))] = False,
    ) -> Annotated[CallToolResult, Retargeted]:
        """Owner: send the final result (target) or the notices (notify) somewhere else,
        before delivery; a run blocked by a failed delivery is re-queued to the new target.
        Returns the run's targets. Next: nothing, or review/approve if not yet done."""

        def work() -> dict[str, Any]:
            with session.store() as store:
                handle = session.run(store, run)
                session.exposure.check_targets(target=target, notify=notify)
                packet = handle.retarget(target, notify, accept_duplicate,
                                         config=session.config)
            return {"run": run, "state": packet.state, "target": packet.target,
                    "notify": packet.notify, "next": "nothing more is needed for the target"}

        return answer("retarget", work)

    return retarget


def _wait(session: Session) -> Any:
    async def checkpoint_wait(
        runs: Annotated[list[RunId], Field(min_length=1, max_length=100, description=(
            "The runs to wait for (at most 100)."))],
        until: Annotated[list[StateName] | None, Field(max_length=6, description=(
            "Wait for these states; leave it out for whatever needs you: ready_for_review, "
            "blocked on a blocker only the owner resolves, delivered, cancelled."))] = None,
        timeout: Annotated[float, Field(ge=0, le=3600, description=(
            "Seconds to wait; at most 50 are waited in one call (longer is cut to 50): "
            "call again while the outcome is timed_out."))] = 50.0,
    ) -> Annotated[CallToolResult, Waited]:
        """Wait until each run needs you (or reaches the states in `until`), up to 50 s per
        call, so the call answers before the host's tool timeout. Read-only. Returns the
        outcome (reached; timed_out: nothing yet, call checkpoint_wait again; ended: a run
        was delivered or cancelled in a state not waited for), each run's outcome and its
        packet. Next: review a ready run, unblock an owner's blocker, or wait again."""
        import anyio.to_thread

        from waypost.durations import utcnow
        from waypost.usecases import reading, waiting

        async def work() -> dict[str, Any]:
            ids = waiting.run_ids(runs, "runs")
            states = waiting.until_states(until)
            seconds = waiting.wait_seconds(timeout, "timeout", default=waiting.TOOL_WAIT_S,
                                           cap=waiting.TOOL_WAIT_S, clamp=True)
            store = await anyio.to_thread.run_sync(session.waiting_store)
            for packet in await anyio.to_thread.run_sync(lambda: [store.get(r) for r in ids]):
                session.permit(packet=packet)  # every run readable, before any waiting
            waited = await waiting.await_runs(store, ids, call=anyio.to_thread.run_sync,
                                              until=states, timeout=seconds)
            grant = session.grant
            seen = await anyio.to_thread.run_sync(lambda: reading.runs(
                store, grant, waited.packets, config=session.config, now=utcnow()))
            steps = {"reached": "review, approve or unblock what needs you",
                     "timed_out": "checkpoint_wait again", "ended": "nothing more to wait for"}
            return {"outcome": waited.outcome, "outcomes": waited.outcomes,
                    "runs": as_json(seen),
                    "next": steps[waited.outcome]}

        return await answer_async("checkpoint_wait", work)

    return checkpoint_wait

def _inbox(session: Session) -> Any:
    def inbox(ack: Annotated[bool, Field(description=(
            "Acknowledge every item listed (those that arrive meanwhile stay)."))] = False,
    ) -> Annotated[CallToolResult, Inboxed]:
        """Owner: what happened on the runs you own since you last acknowledged: a run
        ready for review, blocked on you, gone silent, delivered (with its receipt), its
        delivery failed, cancelled or nudged. The runs' own events, so a lost notice is
        recovered here; each item stays until acknowledged. Returns the items, oldest
        first. Next: act on each (review, unblock, resume), then inbox with ack."""

        def work() -> dict[str, Any]:
            from waypost.usecases import inbox as inboxes

            session.permit()
            with session.store() as store:
                found = inboxes.read(store, session.actor, ack=ack, caller=session.grant,
                                     config=session.config)
            step = ("nothing: these are acknowledged" if ack or not found.items else
                    "act on each item, then inbox with ack")
            ready = [i for i in found.items if i.topic == "ready_for_review"]
            then = ({"next_call": next_call(errors.step(
                "review", ready[-1].run_id, actor=session.actor, why="review the result"))}
                if ready and not ack else {})
            return {**as_json(found), "next": step, **then}

        return answer("inbox", work)

    return inbox
