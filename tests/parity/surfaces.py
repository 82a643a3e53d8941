"""Every entry point of every door and the operation of the table it is (or, in
`NOT_OPERATIONS`, why it is none): a command, tool, route or action added to a door without
a line here fails `test_completeness`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .terms import Op

# `waypost …` (the click tree, groups' commands as "GROUP COMMAND")
CLI_COMMANDS: Final[Mapping[str, Op]] = {
    "start": Op.START, "claim": Op.CLAIM, "resume": Op.RESUME, "heartbeat": Op.HEARTBEAT,
    "block": Op.BLOCK, "unblock": Op.UNBLOCK, "artifact add": Op.ARTIFACT,
    "evidence skip": Op.SKIP, "evidence add": Op.REPORT, "evidence check": Op.CHECK,
    "evidence run": Op.COMMAND, "ready": Op.READY, "review": Op.REVIEW,
    "approve": Op.APPROVE, "changes": Op.CHANGES, "transfer": Op.TRANSFER,
    "cancel": Op.CANCEL, "retarget": Op.RETARGET, "gate add": Op.ADD_GATE,
    "gate adopt": Op.ADOPT_GATE, "show": Op.READ, "ls": Op.LIST, "wait": Op.WAIT,
    "inbox": Op.INBOX,
    "hook": Op.STOP,  # the hook door's (Door.HOOK_CLI)
}
# the MCP server's tools (checkpoint_status reads one run, or lists them)
MCP_TOOLS: Final[Mapping[str, frozenset[Op]]] = {
    "checkpoint_start": frozenset({Op.START}),
    "checkpoint_status": frozenset({Op.READ, Op.LIST}),
    "heartbeat": frozenset({Op.HEARTBEAT}), "block": frozenset({Op.BLOCK}),
    "unblock": frozenset({Op.UNBLOCK}), "add_artifact": frozenset({Op.ARTIFACT}),
    "run_evidence": frozenset({Op.COMMAND}), "check_evidence": frozenset({Op.CHECK}),
    "skip_evidence": frozenset({Op.SKIP}), "mark_ready": frozenset({Op.READY}),
    "claim": frozenset({Op.CLAIM}), "resume": frozenset({Op.RESUME}),
    "transfer": frozenset({Op.TRANSFER}), "review": frozenset({Op.REVIEW}),
    "approve": frozenset({Op.APPROVE}), "request_changes": frozenset({Op.CHANGES}),
    "cancel": frozenset({Op.CANCEL}), "retarget": frozenset({Op.RETARGET}),
    "add_gate": frozenset({Op.ADD_GATE}), "adopt_gate": frozenset({Op.ADOPT_GATE}),
    "checkpoint_wait": frozenset({Op.WAIT}),
    "inbox": frozenset({Op.INBOX}),  # listed, then acknowledged (ack)
}
_RUN = "/api/runs/{run_id}"
# the routes of the app's OpenAPI document, as "METHOD PATH"
HTTP_ROUTES: Final[Mapping[str, frozenset[Op]]] = {
    "POST /api/runs": frozenset({Op.START}), "GET /api/runs": frozenset({Op.LIST}),
    f"GET {_RUN}": frozenset({Op.READ, Op.WAIT}),  # ?wait=DURATION: the long poll
    **{f"POST {_RUN}/{op}": frozenset({op}) for op in (
        Op.CLAIM, Op.RESUME, Op.HEARTBEAT, Op.BLOCK, Op.UNBLOCK, Op.READY, Op.REVIEW,
        Op.APPROVE, Op.CHANGES, Op.TRANSFER, Op.CANCEL, Op.RETARGET)},
    f"POST {_RUN}/evidence": frozenset({Op.SKIP, Op.REPORT, Op.CHECK, Op.COMMAND}),
    f"POST {_RUN}/artifacts/{{name}}": frozenset({Op.ARTIFACT}),
    f"POST {_RUN}/gates": frozenset({Op.ADD_GATE}),
    f"POST {_RUN}/gates/adopt": frozenset({Op.ADOPT_GATE}),
    "GET /api/inbox": frozenset({Op.INBOX}), "POST /api/inbox/ack": frozenset({Op.INBOX}),
    "POST /hooks/claude/{event}": frozenset({Op.STOP}),  # the hook door's (Door.HOOK_HTTP)
    "POST /github/webhook": frozenset({Op.REVIEW, Op.APPROVE, Op.CHANGES, Op.CANCEL}),
}

NOT_OPERATIONS: Final[Mapping[str, str]] = {
    # the CLI
    "init": "makes a store here; no run, no actor's rule",
    "artifact get": "reads an artifact's bytes: the read of a run (show) decides the same",
    "log": "reads a run's events: the read of a run (show) decides the same",
    "verify": "recomputes hash chains; changes nothing, decides nothing per actor",
    "schema": "prints the packet's JSON Schema",
    "deliver": "the outbox relay: the relay's moves, no actor's operation",
    "watch": "the watchdog: records only what is due (core.authority), no actor's operation",
    "prune": "deletes finished runs of a store its operator owns",
    "doctor": "reads the store's health",
    "migrate": "brings a store's schema up to date",
    "limits": "the store-wide text limits, set by whoever administers the store",
    "scan": "runs the sanitizer over files; touches no run",
    "token issue": "issues a bearer token (the store's administrator's)",
    "token ls": "lists tokens (the store's administrator's)",
    "token revoke": "revokes a token (the store's administrator's)",
    "hooks install": "writes an agent host's settings file; touches no run",
    "hooks uninstall": "removes waypost's hooks from an agent host's settings file",
    "serve": "starts the HTTP door",
    "mcp": "starts the MCP door",
    "demo": "a scripted tour in a store of its own",
    "export": "writes a run's signed bundle: a read of the whole run, changes nothing",
    "verify-bundle": "checks a bundle file; no store, no run, no actor",
    "import": "stores a verified bundle as a new, read-only run (the store's administrator's)",
    "keys generate": "makes a signing key (the store's administrator's)",
    "keys ls": "lists the signing keys' public halves",
    "keys export": "prints public keys, or the keyring a verifier pins",
    "keys retire": "retires a signing key (the store's administrator's)",
    # the HTTP API
    f"GET {_RUN}/events": "the run's events: access.Operation.READ, as GET /api/runs/{id}",
    f"GET {_RUN}/verify": "verifies the run's chain: access.Operation.READ",
    f"GET {_RUN}/bundle": "the run's bundle, or its public statement: access.Operation.READ",
    f"GET {_RUN}/artifacts/{{name}}": "an artifact's bytes: access.Operation.READ",
    "GET /a2a/tasks/{run_id}": "the run as an A2A task: access.Operation.READ",
    "GET /events": "the board's live feed: reads, as the board's pages",
}
