"""One remote-exposure policy, two doors: the same request to the HTTP API and to MCP over
HTTP (each a real server on one store, each with an owner's token) gets the same refusal,
word for word, and leaves the store and the server's machine as they were: nothing runs
on the server because a remote caller asked (a command, a command: or http: gate at
review, a check that reads the server's files, an exec: target) unless it was started with
--allow-exec, and a URL a caller registers reaches only a host --allow-host names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from tests.helpers import dump_store
from tests.http_support import Api, serving
from tests.integration.test_mcp import call, drive
from tests.integration.test_mcp_http import client, issue, mcp_server
from waypost.model import ArtifactRole, EvidenceKind, Gate, Verdict
from waypost.store import open_store
from waypost.usecases import runs, starting

# (HTTP route, its body) and (MCP tool, its arguments) for one request; RUN is the run's id
Request = tuple[str, dict[str, Any], str, dict[str, Any]]


def requests(marker: Path) -> dict[str, Request]:
    touch = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    return {
        "an exec: target": (
            "/api/runs", {"title": "t", "target": f"exec:touch {marker}"},
            "checkpoint_start", {"title": "t", "target": f"exec:touch {marker}"}),
        "a target off the allow-list": (
            "/api/runs", {"title": "t", "target": "https://hooks.example.org/w"},
            "checkpoint_start", {"title": "t", "target": "https://hooks.example.org/w"}),
        "an http: gate off the allow-list": (
            "/api/runs", {"title": "t", "gates": ["live=http:http://10.0.0.1/health ok"]},
            "checkpoint_start", {"title": "t", "gates": ["live=http:http://10.0.0.1/health ok"]}),
        "an http: gate whose name holds a colon": (
            "/api/runs", {"title": "t", "gates": ["a:b=http:http://10.0.0.1/ ok"]},
            "checkpoint_start", {"title": "t", "gates": ["a:b=http:http://10.0.0.1/ ok"]}),
        "an added http: gate off the allow-list": (
            "/api/runs/RUN/gates", {"name": "live", "check": "http:http://10.0.0.1/ ok"},
            "add_gate", {"run": "RUN", "name": "live", "check": "http:http://10.0.0.1/ ok"}),
        "a retarget to exec:": (
            "/api/runs/RUN/retarget", {"target": f"exec:touch {marker}"},
            "retarget", {"run": "RUN", "target": f"exec:touch {marker}"}),
        "a notify off the allow-list": (
            "/api/runs/RUN/retarget", {"notify": "http://127.0.0.1:9/n"},
            "retarget", {"run": "RUN", "notify": "http://127.0.0.1:9/n"}),
        "a command: check": (
            "/api/runs/RUN/evidence", {"check": f"command:touch {marker}"},
            "check_evidence", {"run": "RUN", "check": f"command:touch {marker}"}),
        "a grep of the server's files": (
            "/api/runs/RUN/evidence", {"check": "grep:root:/etc/passwd"},
            "check_evidence", {"run": "RUN", "check": "grep:root:/etc/passwd"}),
        "a command": (
            "/api/runs/RUN/evidence", {"argv": touch},
            "run_evidence", {"run": "RUN", "command": touch}),
        "a review whose gate runs a command": (
            "/api/runs/READY/review", {}, "review", {"run": "READY"}),
    }


def prepared(store: Path, marker: Path) -> dict[str, str]:
    """alice's run in progress (RUN), and one ready for review whose gate would leave the
    marker (READY)."""
    with open_store(str(store), create=True) as opened:
        run, _ = starting.start(opened, "Fix it", actor="alice", owner="alice",
                                target="none:", worker="alice")
        ready, _ = starting.start(opened, "Gated", actor="alice", owner="alice",
                                  target="none:", worker="alice", gates=[Gate(
                                      name="touched", check=f"command:touch {marker}")])
        handle = runs.Run(opened, ready.id, actor="alice")
        handle.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "3 passed")
        handle.ready("done")
    return {"RUN": run.id, "READY": ready.id}


def placed(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, dict):
        return {k: placed(v, ids) for k, v in value.items()}
    return [placed(v, ids) for v in value] if isinstance(value, list) else value


def through_http(api: Api, route: str, body: dict[str, Any], ids: dict[str, str]) -> Any:
    for name, run in ids.items():
        route = route.replace(name, run)
    answer = api.post(route, placed(body, ids))
    assert answer.status_code in (403, 409), answer.text
    return answer.json()["error"]


def test_the_same_request_gets_the_same_refusal_at_both_doors(tmp_path: Path) -> None:
    store, marker = tmp_path / "w.db", tmp_path / "ran-on-the-server"
    ids = prepared(store, marker)
    table = requests(marker)
    token = issue(store, "alice", "owner")
    before = dump_store(store)
    with serving(str(store)) as base:
        by_http = {why: through_http(Api(base, token), route, body, ids)
                   for why, (route, body, _, _) in table.items()}
    assert dump_store(store) == before

    async def scenario() -> None:
        with mcp_server(store) as url:
            async with client(url, token) as alice:
                for why, (_, _, tool, arguments) in table.items():
                    result = await alice.call_tool(tool, placed(arguments, ids))
                    assert isinstance(result, CallToolResult)
                    assert result.is_error, why
                    by_mcp = (result.structured_content or {}).get("error", {})
                    assert (by_mcp.get("code"), by_mcp.get("message")) == (
                        by_http[why]["code"], by_http[why]["message"]), why

    drive(scenario)
    assert dump_store(store) == before
    assert not marker.exists()


def test_with_allow_exec_a_review_runs_its_gates_at_both_doors(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    marks = {door: tmp_path / f"reviewed-over-{door}" for door in ("http", "mcp")}
    ids = {door: prepared(store, mark)["READY"] for door, mark in marks.items()}
    token = issue(store, "alice", "owner")
    with serving(str(store), allow_exec=True) as base:
        assert Api(base, token).ok(f"/api/runs/{ids['http']}/review")["approvable"] is True

    async def scenario() -> None:
        with mcp_server(store, "--allow-exec") as url:
            async with client(url, token) as alice:
                reviewed = await call(alice, "review", run=ids["mcp"])
                assert reviewed["approvable"] is True

    drive(scenario)
    assert all(mark.exists() for mark in marks.values())


def test_a_check_reads_no_file_of_the_servers_at_either_door(tmp_path: Path) -> None:
    """An artifact recorded from a file of this machine's, since changed: a local check
    compares the file with its stored copy and fails; a remote caller's check, at either
    door, looks at the stored copy alone (without --allow-exec no file here is read)."""
    store, report = tmp_path / "w.db", tmp_path / "report.md"
    report.write_text("# Report\n\nThe lock is now taken before the counter is read.\n")
    ids = prepared(store, tmp_path / "unused")
    with open_store(str(store)) as opened:
        handle = runs.Run(opened, ids["RUN"], actor="alice")
        handle.add_artifact(str(report), role=ArtifactRole.REPORT, max_bytes=10_000)
        report.write_text("# Report\n\nRewritten on this machine after it was recorded.\n")
        local = handle.check("artifact:report.md").evidence[-1]
    assert (local.verdict, "changed after it was recorded" in local.summary) == (
        Verdict.FAILED, True)
    token = issue(store, "alice", "owner")
    with serving(str(store)) as base:
        over_http = Api(base, token).ok(f"/api/runs/{ids['RUN']}/evidence",
                                        {"check": "artifact:report.md"})
    assert over_http["packet"]["evidence"][-1]["verdict"] == "passed"

    async def scenario() -> None:
        with mcp_server(store) as url:
            async with client(url, token) as alice:
                over_mcp = await call(alice, "check_evidence", run=ids["RUN"],
                                      check="artifact:report.md")
                assert over_mcp["evidence"]["verdict"] == "passed"

    drive(scenario)
