"""Built-in checks and the evidence runner, against a real store, real files and a real
HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Cli
from waypost.errors import InvalidInput
from waypost.store import open_store
from waypost.usecases.checks import parse_check
from waypost.usecases.substance import substance_problem

REAL_REPORT = "# Report\n\nThe flaky login test raced the session cache; it now waits for it.\n"


def problem(name: str, text: str | bytes) -> str | None:
    data = text.encode() if isinstance(text, str) else text
    return substance_problem(name, data, min_bytes=16, min_words=3)


@pytest.mark.parametrize(("text", "why"), [
    ("", "report.md is empty (0 bytes)"),
    ("  \n\t\n", "report.md is only whitespace"),
    ("TODO", "report.md says only TODO"),
    ("todo\n", "report.md says only TODO"),
    ("# Report\n\nTBD\n", "report.md says only TBD besides 1 other word(s)"),
    ("- [ ] TODO: write the report\n- FIXME later\n", "report.md says only TODO, FIXME"),
    ("Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "placeholder text"),
    ("# Results\n\nContent goes here.\n", 'placeholder text ("Content goes here")'),
    ("ok done now", "report.md is only 11 bytes (at least 16 expected"),
    ("Done!!!!!!!!!!!!!!!!!!!!", "report.md has only 1 word(s) (at least 3 expected"),
])
def test_not_substantive(text: str, why: str) -> None:
    found = problem("report.md", text)
    assert found is not None
    assert why in found


def test_substantive_content_passes() -> None:
    assert problem("report.md", REAL_REPORT) is None
    assert problem("report.md", REAL_REPORT + "\nTODO: add a benchmark later\n") is None
    assert problem("data.bin", bytes(range(256)) * 2) is None


@pytest.mark.parametrize(("text", "why"), [
    ('{"rows": [1, 2,}', "data.json is not valid JSON: Expecting value at line 1"),
    ("{}", "data.json holds only an empty JSON value ({})"),
    ("null", "data.json holds only an empty JSON value"),
    ('{"a": 1}', "data.json is only 8 bytes"),
])
def test_json_must_parse_and_hold_something(text: str, why: str) -> None:
    found = problem("data.json", text)
    assert found is not None
    assert why in found
    assert problem("data.json", '{"rows": [1, 2, 3], "ok": true}') is None


@pytest.mark.parametrize("spec", ["artifact:", "grep:x", "grep:(:a.md", "nope:1", "http:ftp://x",
                                  "command:"])
def test_bad_check_specs_are_refused(spec: str) -> None:
    with pytest.raises(InvalidInput):
        parse_check(spec)


# --- through the CLI ---------------------------------------------------------------------


@pytest.fixture
def run(cli: Cli) -> str:
    cli.ok("init")
    run_id = cli.ok("start", "Write the report", "--owner", "alice")
    cli.ok("claim", run_id, actor="w1")
    return run_id


def check(cli: Cli, run: str, spec: str, actor: str = "w1") -> dict[str, Any]:
    evidence: dict[str, Any] = cli("evidence", "check", run, spec, "--json",
                                   actor=actor).json()["evidence"]
    return evidence


def packet(cli: Cli, run: str) -> dict[str, Any]:
    document: dict[str, Any] = cli("show", run, "--json").json()
    return document


@pytest.mark.parametrize(("content", "why"), [
    ("", "report.md is empty (0 bytes)"),
    ("TODO\n", "report.md says only TODO"),
])
def test_placeholder_report_fails_the_check_and_ready_says_why(
        cli: Cli, run: str, tmp_path: Path, content: str, why: str) -> None:
    (tmp_path / "report.md").write_text(content)
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    found = check(cli, run, "artifact:report.md")
    assert (found["verdict"], found["assurance"], found["kind"]) == ("failed", "recorded",
                                                                     "inspect")
    assert why in found["summary"]
    before = packet(cli, run)["version"]
    refused = cli("ready", run, "--summary", "done", "--artifact", "report.md", "--json",
                  actor="w1")
    assert refused.code == 3
    assert why in refused.error()["message"]
    assert "waypost artifact add" in refused.error()["hint"]
    after = packet(cli, run)
    assert (after["state"], after["version"]) == ("in_progress", before)


def test_a_real_report_passes_and_ready_goes_through(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(REAL_REPORT)
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    found = check(cli, run, "artifact:report.md")
    assert found["verdict"] == "passed", found["summary"]
    cli.ok("ready", run, "--summary", "done", "--artifact", "report.md", actor="w1")
    assert packet(cli, run)["state"] == "ready_for_review"


def test_the_thresholds_come_from_waypost_toml(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text("[limits]\nmin_artifact_bytes = 200\n"
                                           "min_artifact_words = 1\n")
    (tmp_path / "report.md").write_text(REAL_REPORT)
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    assert "at least 200 expected" in check(cli, run, "artifact:report.md")["summary"]


def test_artifact_check_sees_a_file_changed_after_recording(
        cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(REAL_REPORT)
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    (tmp_path / "report.md").write_text(REAL_REPORT + "\nedited later\n")
    found = check(cli, run, "artifact:report.md")
    assert found["verdict"] == "failed"
    assert "changed after it was recorded (hash mismatch" in found["summary"]


def test_missing_and_reference_artifacts_fail(cli: Cli, run: str) -> None:
    assert "no artifact 'x.md' was recorded" in check(cli, run, "artifact:x.md")["summary"]
    cli.ok("artifact", "add", run, "https://example.invalid/r.md", actor="w1")
    assert "not a stored copy" in check(cli, run, "artifact:r.md")["summary"]


def test_grep_present_and_absent(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def login():\n    return wait_for_cache()\n")
    (tmp_path / "report.md").write_text(REAL_REPORT)
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    assert check(cli, run, "grep:wait_for_cache:src/app.py")["verdict"] == "passed"
    found = check(cli, run, "grep!:wait_for_cache:src")
    assert found["verdict"] == "failed"
    assert "src/app.py:2" in found["summary"]
    assert check(cli, run, "grep!:TODO|FIXME:report.md")["verdict"] == "passed"
    missing = check(cli, run, "grep:nothing-like-this:report.md")
    assert (missing["verdict"], missing["summary"]) == (
        "failed", "/nothing-like-this/ not found in report.md")
    assert "no artifact, file or directory" in check(cli, run, "grep:x:nope")["summary"]


def test_grep_on_an_artifact_reads_the_stored_copy(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(REAL_REPORT)
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    (tmp_path / "report.md").unlink()
    found = check(cli, run, "grep:session cache:report.md")
    assert (found["verdict"], found["summary"]) == (
        "passed", "/session cache/ found at artifact report.md:3")


def test_no_private(cli: Cli, run: str, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(REAL_REPORT)
    address = ".".join(["10", "0", "0", "7"])
    (tmp_path / "notes.md").write_text(f"{REAL_REPORT}ssh to {address}\n")
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    assert check(cli, run, "no-private:report.md")["verdict"] == "passed"
    cli.ok("artifact", "add", run, "notes.md", actor="w1")
    found = check(cli, run, "no-private")
    assert found["verdict"] == "failed"
    assert found["summary"] == ("1 private identifier(s) in 2 artifact(s): private_ip in "
                                "notes.md:4")


def test_command_check(cli: Cli, run: str) -> None:
    passed = check(cli, run, "command:sh -c 'echo fine'")
    assert (passed["verdict"], passed["exit_code"], passed["output_tail"]) == ("passed", 0,
                                                                               "fine\n")
    failed = check(cli, run, "command:false")
    assert (failed["verdict"], failed["exit_code"]) == ("failed", 1)
    assert check(cli, run, "command:no-such-program-here")["exit_code"] == 127


def test_a_bad_check_is_a_usage_error(cli: Cli, run: str) -> None:
    outcome = cli("evidence", "check", run, "artifact", "--json", actor="w1")
    assert outcome.code == 2
    assert "artifact:NAME" in outcome.error()["hint"]


# --- http: a real server on 127.0.0.1 --------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = {"/health": 200, "/missing": 404, "/broken": 503}.get(self.path, 200)
        body = b"status: ok\n" if status == 200 else b"nope\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_http_check(cli: Cli, run: str, server: str) -> None:
    ok = check(cli, run, f"http:{server}/health status: ok")
    assert (ok["verdict"], ok["kind"]) == ("passed", "live_check")
    assert f"GET {server}/health → 200" in ok["summary"]
    assert "found 'status: ok'" in ok["summary"]
    assert ok["output_tail"] == "status: ok\n"
    assert check(cli, run, f"http:{server}/health")["verdict"] == "passed"
    wrong_text = check(cli, run, f"http:{server}/health all green")
    assert (wrong_text["verdict"], "did not find 'all green'" in wrong_text["summary"]) == (
        "failed", True)
    for path, status in (("/missing", "404"), ("/broken", "503")):
        found = check(cli, run, f"http:{server}{path}")
        assert found["verdict"] == "failed"
        assert f"→ {status}" in found["summary"]


def test_http_check_against_nothing_listening(cli: Cli, run: str, server: str) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    found = check(cli, run, f"http:http://127.0.0.1:{port}/")
    assert found["verdict"] == "failed"
    assert "failed:" in found["summary"]


# --- the evidence runner and the blob store ------------------------------------------------


def test_evidence_run_records_failure_and_success(cli: Cli, run: str) -> None:
    failed = cli("evidence", "run", run, "--json", "--", "false", actor="w1").json()["evidence"]
    assert (failed["verdict"], failed["exit_code"], failed["assurance"]) == (
        "failed", 1, "recorded")
    passed = cli("evidence", "run", run, "--json", "--", "sh", "-c", "echo ok",
                 actor="w1").json()["evidence"]
    assert (passed["verdict"], passed["exit_code"], passed["assurance"]) == (
        "passed", 0, "recorded")
    assert passed["output_tail"] == "ok\n"
    with open_store(str(cli.store)) as store:
        assert store.get_blob(passed["log_sha256"]) == b"ok\n"
        assert store.get_blob(failed["log_sha256"]) == b""
    shown = cli.ok("show", run)
    assert "e1 failed  recorded" in shown
    assert "e2 passed  recorded" in shown


def test_artifact_get_returns_identical_bytes_after_the_copy_is_gone(
        cli: Cli, run: str, tmp_path: Path) -> None:
    original = (REAL_REPORT * 50).encode() + bytes(range(256))
    (tmp_path / "report.md").write_bytes(original)
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    (tmp_path / "report.md").unlink()
    out = tmp_path / "fetched"
    out.mkdir()
    cli.ok("artifact", "get", run, "report.md", "-o", str(out))
    fetched = (out / "report.md").read_bytes()
    assert hashlib.sha256(fetched).hexdigest() == hashlib.sha256(original).hexdigest()
