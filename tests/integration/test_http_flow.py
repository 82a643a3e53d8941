"""The whole flow over HTTP: the owner starts a run, a worker in a process of its own that
knows only the URL and its worker token does the work, the owner reviews and approves, and
the relay delivers. On SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import pg
from tests.http_support import Api, issue, serving

# The worker: nothing but httpx, the URL and the token (no waypost import, no store).
WORKER = r'''
import json, os, sys
import httpx

url, token, run = os.environ["API"], os.environ["TOKEN"], os.environ["RUN"]
client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

def post(path, body=None, **kw):
    r = client.post(f"/api/runs/{run}/{path}", json=body if body is not None else {}, **kw)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()

epoch = post("claim")["epoch"]
post("heartbeat", {"epoch": epoch, "note": "reproduced the failure", "progress": 0.3})
blocker = post("block", {"epoch": epoch, "kind": "unavailable_resource",
                         "detail": "the staging database is down"})["blocker"]
post("unblock", {"epoch": epoch, "blocker": blocker, "resolution": "it is back"})
report = b"# Report\n\nThe flaky test waited on a clock; it now uses the fake clock.\n"
r = client.post(f"/api/runs/{run}/artifacts/report.md", content=report,
                params={"role": "report", "epoch": epoch})
assert r.status_code == 200, r.text
post("evidence", {"epoch": epoch, "check": "artifact:report.md"})
post("evidence", {"epoch": epoch, "kind": "test", "verdict": "passed",
                  "summary": "the suite passed 20 times in a row"})
done = post("ready", {"epoch": epoch, "summary": "fixed the flaky test",
                      "public_summary": "The flaky test is fixed.", "artifacts": ["report.md"]})
print(json.dumps({"state": done["state"], "epoch": epoch}))
'''


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_remote_worker_and_owner_take_a_run_to_delivery_over_http(
        backend: str, tmp_path: Path) -> None:
    with pg.fresh_schema() if backend == "postgres" else contextlib.nullcontext("") as pg_url:
        url = pg_url or str(tmp_path / ".waypost" / "waypost.db")
        owner_token = issue(url, "alice", "owner")
        with serving(url) as base:
            owner = Api(base, owner_token)
            started = owner.post("/api/runs", {
                "title": "Fix the flaky test", "kind": "long_running",
                "target": "file:result.md", "max_silence": "30m",
                "gates": ["report=artifact:report.md", "clean=no-private"]})
            assert started.status_code == 201, started.text
            run = started.json()["run"]
            worker_token = issue(url, "worker-1", "worker", run_id=run)
            env = {**os.environ, "API": base, "TOKEN": worker_token, "RUN": run}
            env.pop("WAYPOST_URL", None)
            worker = subprocess.run([sys.executable, "-c", WORKER], env=env, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120, check=False)
            assert worker.returncode == 0, worker.stderr
            assert json.loads(worker.stdout) == {"state": "ready_for_review", "epoch": 1}

            reviewed = owner.ok(f"/api/runs/{run}/review")
            assert reviewed["approvable"] is True
            assert {g["gate"] for g in reviewed["gates"]} >= {"report", "clean"}
            assert reviewed["reviewed"].startswith("sha256:")  # what approve names
            approved = owner.ok(f"/api/runs/{run}/approve", {"reviewed": reviewed["reviewed"]})
            assert approved["state"] == "approved"
            events = owner.get(f"/api/runs/{run}/events", limit=500).json()["events"]
            [approval] = [e["data"] for e in events if e["data"]["type"] == "approved"]
            assert approval["reviewed"] == reviewed["reviewed"]
            actors = {e["data"]["type"]: e["actor"] for e in events}
            assert actors["claimed"] == actors["marked_ready"] == "worker-1"
            assert actors["approved"] == "alice"

        relay = subprocess.run([sys.executable, "-m", "waypost", "deliver", "--once",
                                "--dir", str(tmp_path)],
                               env={**os.environ, "WAYPOST_URL": url}, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120, check=False)
        assert relay.returncode == 0, relay.stderr
        assert "flaky test" in (tmp_path / "result.md").read_text()
        with serving(url) as base:
            shown = Api(base, owner_token).get(f"/api/runs/{run}").json()
            assert shown["state"] == "delivered"
            assert Api(base, owner_token).get(f"/api/runs/{run}/verify").json()["ok"] is True
