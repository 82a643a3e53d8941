"""Reads and checks within bounds: only regular files are read, up to a size limit; links
inside a folder are not followed; user patterns match in linear time (RE2); every HTTP
request ends by one overall deadline, however slowly the server answers. Each call has a
hang guard."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.bounded_support import (
    GUARD,
    evidence,
    finishes,
    started_run,
    trickling_server,
    waypost,
)
from tests.delivery_support import new_secret
from waypost.config import Config
from waypost.delivery.base import Outgoing
from waypost.delivery.policy import Outcome
from waypost.delivery.webhook import WebhookTarget
from waypost.model import Delivery, DeliveryStatus, Purpose
from waypost.store import open_store
from waypost.usecases import checks


@pytest.fixture
def run(tmp_path: Path) -> str:
    return started_run(tmp_path)


def grep(folder: Path, run: str, spec: str) -> dict[str, object]:
    return evidence(waypost(folder, "evidence", "check", run, "--json", spec))


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe")
    return tmp_path / "pipe"


def test_grep_refuses_a_fifo(tmp_path: Path, run: str, fifo: Path) -> None:
    found = grep(tmp_path, run, "grep:x:pipe")
    assert found["verdict"] == "failed"
    assert "pipe is a FIFO: only regular files are read" in str(found["summary"])


@pytest.mark.parametrize("name", ["/dev/zero", "zero-link"])
def test_grep_refuses_a_device_even_through_a_link(tmp_path: Path, run: str, name: str) -> None:
    (tmp_path / "zero-link").symlink_to("/dev/zero")
    found = grep(tmp_path, run, f"grep:x:{name}")
    assert found["verdict"] == "failed"
    assert "is a character device" in str(found["summary"])


def test_grep_refuses_a_file_over_the_limit(tmp_path: Path, run: str) -> None:
    (tmp_path / "waypost.toml").write_text("[limits]\nmax_artifact_bytes = 1000\n")
    (tmp_path / "big.txt").write_text("needle\n" + "x" * 5000)
    found = grep(tmp_path, run, "grep:needle:big.txt")
    assert found["verdict"] == "failed"
    assert "big.txt is larger than 1000 bytes" in str(found["summary"])


def test_grep_over_a_folder_reads_its_regular_files_only(tmp_path: Path, run: str) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("the needle is here\n")
    os.mkfifo(folder / "pipe")
    (folder / "zero").symlink_to("/dev/zero")
    (tmp_path / "outside.md").write_text("elsewhere: a thread\n")
    (folder / "out").symlink_to(tmp_path / "outside.md")
    assert grep(tmp_path, run, "grep:needle:docs")["verdict"] == "passed"
    assert grep(tmp_path, run, "grep:thread:docs")["verdict"] == "failed"


def test_a_catastrophic_pattern_runs_in_linear_time(tmp_path: Path, run: str) -> None:
    (tmp_path / "line.txt").write_text("a" * 41 + "!\n")
    found = grep(tmp_path, run, "grep:^(a+)+$:line.txt")
    assert found["verdict"] == "failed"
    assert "not found in line.txt" in str(found["summary"])
    assert grep(tmp_path, run, "grep:^(a+)+!$:line.txt")["verdict"] == "passed"


def test_a_pattern_re2_cannot_compile_is_refused_naming_it(tmp_path: Path, run: str) -> None:
    (tmp_path / "a.txt").write_text("aa\n")
    done = waypost(tmp_path, "evidence", "check", run, "--json", r"grep:(a)\1:a.txt")
    assert done.returncode == 2
    assert json.loads(done.stderr)["error"]["message"].startswith(r"bad pattern '(a)\\1'")
    assert "re2.cc" not in done.stderr  # RE2's own log stays quiet


def test_scan_refuses_a_fifo_and_a_device_by_name(tmp_path: Path, fifo: Path) -> None:
    for name, what in (("pipe", "a FIFO"), ("/dev/zero", "a character device")):
        done = waypost(tmp_path, "scan", name, "--json")
        assert done.returncode == 2, done.stderr
        assert f"{name} is {what}" in done.stderr


def test_scan_of_proc_fds_finishes(tmp_path: Path) -> None:
    done = waypost(tmp_path, "scan", "/proc/self/fd", "--json")
    assert done.returncode == 0, done.stderr


def test_scan_does_not_follow_links_out_of_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (tmp_path / "outside.md").write_text("Project Falcon ships soon\n")
    (folder / "out.md").symlink_to(tmp_path / "outside.md")
    (folder / "zero").symlink_to("/dev/zero")
    os.mkfifo(folder / "pipe")
    (folder / "inside.md").write_text("Project Falcon again\n")
    done = waypost(tmp_path, "scan", "docs", "--deny", "Project Falcon", "--json")
    assert done.returncode == 3, done.stderr
    assert '"files_scanned":1' in done.stdout.replace(" ", "")
    assert "inside.md" in done.stdout
    assert "out.md" not in done.stdout


def test_the_http_check_ends_by_its_deadline(tmp_path: Path, run: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "HTTP_TIMEOUT", 1.5)
    with trickling_server() as url, open_store(str(tmp_path / ".waypost" / "waypost.db")) as db:
        ctx = checks.Context(store=db, packet=db.get(run), config=Config())
        check = checks.parse_check(f"http:{url}/health")
        found = finishes(lambda: checks.run_check(check, ctx), within=GUARD)
    assert found.verdict == "failed"
    assert "no complete answer within 1.5s" in found.summary


def test_a_webhook_ends_by_its_deadline() -> None:
    now = datetime.now(UTC)
    delivery = Delivery(key="d_1", run_id="wp_1", purpose=Purpose.FINAL, topic="approved",
                        target="", event_seq=1, created_at=now, queued_at=now,
                        status=DeliveryStatus.QUEUED, attempts=1, next_attempt_at=now)
    outgoing = Outgoing(delivery=delivery, document={"run": "wp_1"})
    with trickling_server() as url:
        target = WebhookTarget(f"{url}/hook", secret=new_secret(), timeout=1.5)
        attempt = finishes(lambda: target.send(outgoing, at=now), within=GUARD)
    assert attempt.outcome is Outcome.RETRY
    assert "within 1.5s" in attempt.detail


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy that answers every request itself, saying what it was asked for."""

    def do_GET(self) -> None:
        body = f"via the proxy: {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_the_http_check_goes_through_the_environments_proxy(
        tmp_path: Path, run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
    try:
        with open_store(str(tmp_path / ".waypost" / "waypost.db")) as db:
            ctx = checks.Context(store=db, packet=db.get(run), config=Config())
            check = checks.parse_check("http:http://example.invalid/health via the proxy")
            found = finishes(lambda: checks.run_check(check, ctx))
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()
    assert found.verdict == "passed", found.summary
    assert found.output_tail == "via the proxy: http://example.invalid/health"
