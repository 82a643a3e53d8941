"""`POST /api/runs/{id}/{command}`: the worker's and the owner's verbs, each one call of
`waypost.http.operations` (the role first, then the same use case as the CLI)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, post
from litestar.params import JSONBody, PathParameter

from waypost.http import operations as ops
from waypost.http import shapes
from waypost.http.deps import CallerDep, ConfigDep, StoreDep
from waypost.http.errors import ERRORS

RunId = Annotated[str, PathParameter(max_length=64, description="The run's id (wp_…).")]


class CommandsController(Controller):
    path = "/api/runs/{run_id:str}"
    tags = ("commands",)

    @post("/claim", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Worker: take (or take over) the lease; answers the epoch")
    def claim(self, store: StoreDep, caller: CallerDep, run_id: RunId) -> shapes.Moved:
        return ops.claim(store, caller, run_id)

    @post("/resume", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Worker: take a silent run over; answers the handoff brief")
    def resume(self, store: StoreDep, caller: CallerDep, run_id: RunId) -> shapes.Resumed:
        return ops.resume(store, caller, run_id)

    @post("/heartbeat", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Worker: alive, with a note and progress")
    def heartbeat(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                  data: JSONBody[shapes.HeartbeatBody]) -> shapes.Moved:
        return ops.heartbeat(store, caller, run_id, data)

    @post("/block", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Record a blocker; answers its id")
    def block(self, store: StoreDep, caller: CallerDep, run_id: RunId,
              data: JSONBody[shapes.BlockBody]) -> shapes.Moved:
        return ops.block(store, caller, run_id, data)

    @post("/unblock", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Resolve a blocker (a worker: failed_command, unavailable_resource, other)")
    def unblock(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                data: JSONBody[shapes.UnblockBody]) -> shapes.Moved:
        return ops.unblock(store, caller, run_id, data)

    @post("/evidence", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Record evidence: a check, a command (--allow-exec), a skip or a report")
    def evidence(self, store: StoreDep, caller: CallerDep, config: ConfigDep, run_id: RunId,
                 data: JSONBody[shapes.EvidenceBody]) -> shapes.Moved:
        return ops.evidence(store, caller, config, run_id, data)

    @post("/ready", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Worker: submit the result for review")
    def ready(self, store: StoreDep, caller: CallerDep, config: ConfigDep, run_id: RunId,
              data: JSONBody[shapes.ReadyBody]) -> shapes.Moved:
        return ops.ready(store, caller, config, run_id, data)

    @post("/gates", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Declare another gate (the owner's runs at review; a worker's, added "
          "before ready, runs once the owner adopts it)")
    def add_gate(self, store: StoreDep, caller: CallerDep, config: ConfigDep, run_id: RunId,
                 data: JSONBody[shapes.GateBody]) -> shapes.Moved:
        return ops.add_gate(store, caller, config, run_id, data)

    @post("/gates/adopt", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: make a gate someone else declared your own, so review runs it")
    def adopt_gate(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                   data: JSONBody[shapes.AdoptBody]) -> shapes.Moved:
        return ops.adopt_gate(store, caller, run_id, data)

    @post("/review", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: re-run the gates here (command/http gates need --allow-exec)")
    def review(self, store: StoreDep, caller: CallerDep, config: ConfigDep,
               run_id: RunId) -> shapes.Reviewed:
        return ops.review(store, caller, config, run_id)

    @post("/approve", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: approve (with waivers); queues the final delivery")
    def approve(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                data: JSONBody[shapes.ApproveBody]) -> shapes.Moved:
        return ops.approve(store, caller, run_id, data)

    @post("/changes", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: send the result back, with the reason")
    def changes(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                data: JSONBody[shapes.ChangesBody]) -> shapes.Moved:
        return ops.changes(store, caller, run_id, data)

    @post("/transfer", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: hand an authority (approve, deliver, takeover) to an actor")
    def transfer(self, store: StoreDep, caller: CallerDep, run_id: RunId,
                 data: JSONBody[shapes.TransferBody]) -> shapes.Moved:
        return ops.transfer(store, caller, run_id, data)

    @post("/cancel", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: stop the run for good, with the reason")
    def cancel(self, store: StoreDep, caller: CallerDep, run_id: RunId,
               data: JSONBody[shapes.ReasonBody]) -> shapes.Moved:
        return ops.cancel(store, caller, run_id, data)

    @post("/retarget", sync_to_thread=True, responses=ERRORS, status_code=200,
          summary="Owner: a new target or notify URI, before delivery")
    def retarget(self, store: StoreDep, caller: CallerDep, config: ConfigDep, run_id: RunId,
                 data: JSONBody[shapes.RetargetBody]) -> shapes.Moved:
        return ops.retarget(store, caller, config, run_id, data)
