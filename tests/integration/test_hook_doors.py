"""One hook answer at both hook doors: `waypost hook EVENT --host claude` (a real process,
the host's JSON on stdin) and `POST /hooks/claude/{event}` (a real server) give the same
decision and reason for the same input. At the HTTP door a hook's own failure is a
refusal in the host's shape, always 200 (a host reads any other status as "let it stop");
a caller that can never succeed is let stop after the cap, told how to fix it and nothing
of any run; and a token that may not write a run never moves that run's count."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import waypost
from tests.http_support import issue, serve_process, serving
from waypost.config import Config
from waypost.durations import utcnow
from waypost.usecases import tokens
from waypost.usecases.starting import parse_gate

SESSION = "3f1c2a9e-5b7d-4c8e-9a1f-0d2b4e6f8a10"
HANG_GUARD = 60  # seconds; a hook answers in well under one
Answer = dict[str, Any]  # the host's JSON: {} for "nothing to say"


def claude(event: str = "Stop", session: str = SESSION, **extra: Any) -> bytes:
    """Claude Code's documented hook input for `event`."""
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl",
                       "cwd": "/tmp", "permission_mode": "default", "hook_event_name": event,
                       "stop_hook_active": False, **extra}).encode()


@dataclass
class Project:
    """A folder with a store, a server on it and a worker's token (for every run)."""

    folder: Path
    url: str
    token: str
    store_url: str

    def start(self, session: str = SESSION, **kw: Any) -> str:
        with waypost.open_store(self.store_url) as store:
            run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                                   target="none:", worker="w1", session=session, **kw)
        return run.id

    def act(self, run_id: str, actor: str, verb: str, *args: Any) -> Any:
        with waypost.open_store(self.store_url) as store:
            return getattr(waypost.Run(store, run_id, actor=actor), verb)(*args)

    def packet(self, run_id: str) -> waypost.Packet:
        with waypost.open_store(self.store_url) as store:
            return store.get(run_id)

    def cli(self, data: bytes, event: str = "stop", *args: str, **env: str) -> Answer:
        """The command door's answer, as the HTTP door would send it: its JSON, or a stop
        let through with its reason (stderr) as the systemMessage."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
        proc = subprocess.run([sys.executable, "-m", "waypost", "hook", event, "--host",
                               "claude", *args], input=data, capture_output=True,
                              cwd=self.folder, env={**clean, **env}, timeout=HANG_GUARD,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        out, log = proc.stdout.decode().strip(), proc.stderr.decode().strip()
        found: Answer = json.loads(out) if out else ({"systemMessage": log} if log else {})
        return found

    def http(self, data: bytes, event: str = "stop", *, token: str | None = "",
             headers: dict[str, str] | None = None, cap: str | None = None,
             run: str | None = None) -> Answer:
        """The HTTP door's answer (which must be a 200, whatever happened)."""
        secret = self.token if token == "" else token
        params = {k: v for k, v in (("cap", cap), ("run", run)) if v is not None}
        sent = {"Authorization": f"Bearer {secret}"} if secret else {}
        response = httpx.post(f"{self.url}/hooks/claude/{event}", content=data,
                              params=params, headers={**sent, **(headers or {})}, timeout=60)
        assert response.status_code == 200, response.text
        found: Answer = response.json()
        return found


@pytest.fixture
def make_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Project]]:
    """Projects, each with its store and a server on it (`require_run` in its waypost.toml
    and in the server's configuration)."""
    with _Servers() as servers:
        def make(require_run: bool = False) -> Project:
            folder = tmp_path_factory.mktemp("project")
            store_url = str(folder / ".waypost" / "waypost.db")
            with waypost.open_store(store_url):
                pass
            if require_run:
                (folder / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
            url = servers.enter(serving(store_url, project=Config(require_run=require_run)))
            return Project(folder, url, issue(store_url, "w1", "worker"), store_url)

        yield make


class _Servers:
    def __init__(self) -> None:
        from contextlib import ExitStack

        self.stack = ExitStack()

    def __enter__(self) -> _Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def enter(self, server: Any) -> str:
        url: str = self.stack.enter_context(server)
        return url


@pytest.fixture
def project(make_project: Callable[..., Project]) -> Project:
    made: Project = make_project()
    return made


def blocks(said: Answer) -> str:
    """The reason of Claude Code's refusal (anything else fails the test)."""
    assert said == {"decision": "block", "reason": said.get("reason")}, said
    return str(said["reason"])


# --- the same input, the same answer at both doors --------------------------------------------

Setup = Callable[[Project], None]


def _in_progress(p: Project) -> None:
    p.start(gates=[parse_gate("tests=command:true")])


def _owner_blocker(p: Project) -> None:
    run = p.start()
    p.act(run, "w1", "block", waypost.BlockerKind.MISSING_INPUT, "the staging key")


def _worker_blocker(p: Project) -> None:
    run = p.start()
    p.act(run, "w1", "block", waypost.BlockerKind.FAILED_COMMAND, "pytest fails")


def _ready(p: Project) -> None:
    run = p.start()
    p.act(run, "w1", "report_evidence", waypost.EvidenceKind.TEST, waypost.Verdict.PASSED,
          "ran the tests")
    p.act(run, "w1", "ready", "fixed the race")


def _nothing(p: Project) -> None:
    return None


STOPS: dict[str, tuple[Setup, list[tuple[bytes, str, tuple[str, ...]]], bool]] = {
    # name: (setup, [(input, event, CLI args)], require_run)
    "a run in progress": (_in_progress, [(claude(), "stop", ())], False),
    "a worker's blocker": (_worker_blocker, [(claude(), "stop", ())], False),
    "the owner's blocker": (_owner_blocker, [(claude(), "stop", ())], False),
    "ready for review": (_ready, [(claude(), "stop", ())], False),
    "no run": (_nothing, [(claude(), "stop", ())], False),
    "no run, one required, to the cap": (_nothing, [(claude(), "stop", ("--cap", "2"))] * 3,
                                         True),
    "past the cap": (_in_progress, [(claude(), "stop", ("--cap", "2"))] * 4, False),
    "a subagent's own run": (_in_progress, [(claude("SubagentStop", agent_id=SESSION),
                                             "subagent-stop", ())], False),
    "not JSON": (_nothing, [(b"{not json", "stop", ())], False),
    "no session": (_nothing, [(b'{"hook_event_name": "Stop"}', "stop", ())], False),
    "another event's input": (_in_progress, [(claude("UserPromptSubmit"), "stop", ())], False),
    "an event there is not": (_nothing, [(claude(), "teleport", ())], False),
    "a prompt": (_in_progress, [(claude("UserPromptSubmit"), "user-prompt-submit", ())], False),
    "a prompt with no run": (_nothing, [(claude("UserPromptSubmit"), "user-prompt-submit",
                                         ())], False),
}


@pytest.mark.parametrize("name", list(STOPS))
def test_the_same_input_gets_the_same_answer_at_both_doors(
        make_project: Callable[..., Project], name: str) -> None:
    setup, calls, require_run = STOPS[name]
    by_cli, by_http = make_project(require_run), make_project(require_run)
    setup(by_cli)
    setup(by_http)
    for data, event, args in calls:
        cap = dict(zip(args[::2], args[1::2], strict=True)).get("--cap")
        said_cli = by_cli.cli(data, event, *args)
        said_http = by_http.http(data, event, cap=cap)
        assert _runs_named(by_cli, said_cli) == _runs_named(by_http, said_http)
    assert _runs_named(by_cli, _recorded(by_cli)) == _runs_named(by_http, _recorded(by_http))


def _recorded(project: Project) -> list[Any]:
    """What the hooks left on the runs: states, versions, blockers and who opened them."""
    with waypost.open_store(project.store_url) as store:
        return [(p.state, p.version, [(b.detail, b.opened_by) for b in p.blockers])
                for p in store.list_runs()]


def _runs_named(project: Project, said: Any) -> str:
    with waypost.open_store(project.store_url) as store:
        text = json.dumps(said, sort_keys=True)
        for run_id in store.run_ids():
            text = text.replace(run_id, "RUN")
    return text


def test_waypost_serve_answers_as_the_command_line_does(project: Project) -> None:
    """`waypost serve` itself, in a process of its own: the same refusal, then no token."""
    run = project.start(gates=[parse_gate("tests=command:true")])
    with serve_process(project.store_url) as (_, url):
        served = Project(project.folder, url, project.token, project.store_url)
        assert served.http(claude()) == project.cli(claude())
        reason = blocks(served.http(claude(), token=None))
    assert "carries no waypost token" in reason
    assert run not in reason


def test_a_session_start_gets_the_same_brief_and_attaches_the_named_run(
        project: Project) -> None:
    run = project.start(session="parent-session")
    start = claude("SessionStart", session="worker-session", source="startup")
    by_cli = project.cli(start, "session-start", WAYPOST_RUN=run)
    by_http = project.http(start, "session-start", run=run)
    assert by_cli == by_http
    assert by_http["hookSpecificOutput"]["additionalContext"].startswith(f"HANDOFF {run}")
    assert f"run {run} is in_progress" in blocks(project.http(claude(session="worker-session")))


def test_a_run_named_holds_a_session_from_its_first_stop_at_both_doors(
        project: Project) -> None:
    """A host that runs only the stop hook: a session with no run of its own is held to
    the run its parent named (WAYPOST_RUN, `?run=`) from the first stop, which takes the run
    from no other session; a name that finds no run is refused, then let go past the cap,
    as a session with no run is."""
    run = project.start(session="parent-session")
    by_cli = project.cli(claude(session="cli-session"), WAYPOST_RUN=run)
    by_http = project.http(claude(session="http-session"), run=run)
    assert blocks(by_cli) == blocks(by_http)
    assert f"run {run} is in_progress" in blocks(by_http)
    assert _session_run(project, "parent-session") == run
    assert _session_run(project, "http-session") is None
    for _ in range(2):
        assert "names no run in this store" in blocks(
            project.cli(claude(session="s-new"), "stop", "--cap", "2", WAYPOST_RUN="wp_nosuch"))
        assert "names no run in this store" in blocks(
            project.http(claude(session="s-new"), cap="2", run="wp_nosuch"))
    for said in (project.cli(claude(session="s-new"), "stop", "--cap", "2",
                             WAYPOST_RUN="wp_nosuch"),
                 project.http(claude(session="s-new"), cap="2", run="wp_nosuch")):
        assert "was refused a stop 2 times in a row" in said["systemMessage"]


def _session_run(project: Project, session: str) -> str | None:
    with waypost.open_store(project.store_url) as store:
        return store.session_run(session)


# --- a hook's own failure: a refusal, 200, at the HTTP stop route ----------------------------


def test_every_failure_at_the_stop_route_is_a_200_refusal(project: Project,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    run = project.start()
    with waypost.open_store(project.store_url) as store:
        dead, grant = tokens.issue(store, holder="w1", role="worker", run_id=None, ttl=None,
                                   by="test")
        tokens.revoke(store, grant.id)
        old, _ = tokens.issue(store, holder="w1", role="worker", run_id=None, by="test",
                              ttl=timedelta(seconds=1), now=utcnow() - timedelta(hours=1))
    cases: list[tuple[str, Answer]] = [
        ("not JSON", project.http(b"{not json")),
        ("no session", project.http(b'{"hook_event_name": "Stop"}')),
        ("a JSON array", project.http(b"[]")),
        ("too large", project.http(b'{"x": "' + b"y" * (2 << 20) + b'"}')),
        ("a bad cap", project.http(claude(), cap="lots")),
        ("no token", project.http(claude(), token=None)),
        ("not a bearer", project.http(claude(), token=None, headers={"Authorization": "Basic x"})),
        ("an unknown token", project.http(claude(), token="wpt_0000_nothing")),
        ("a revoked token", project.http(claude(), token=dead)),
        ("an expired token", project.http(claude(), token=old)),
        ("an unknown run", project.http(claude(session="s-new"), run="wp_nosuchrun")),
    ]
    for name, said in cases:
        reason = blocks(said)
        assert reason.startswith(("waypost hook failed:", "waypost: ")), name
        if "token" in name or name == "not a bearer":
            assert "waypost token issue" in reason, name
            assert run not in reason, name
            assert "flaky" not in reason, name
    assert project.packet(run).version == 1  # none of them changed the run


def test_a_busy_store_is_a_200_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_BUSY_TIMEOUT", "300ms")
    store_url = str(tmp_path / "w.db")
    with waypost.open_store(store_url) as store:
        waypost.start(store, "Fix it", actor="alice", owner="alice", target="none:",
                      worker="w1", session=SESSION)
    with serving(store_url) as url:
        project = Project(tmp_path, url, issue(store_url, "w1", "worker"), store_url)
        holder = sqlite3.connect(store_url, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another writer holds the store
            reason = blocks(project.http(claude()))
        finally:
            holder.close()
    assert reason.startswith("waypost hook failed:")
    assert "busy" in reason


def test_a_failure_at_a_session_start_is_told_not_refused_and_names_no_run(
        project: Project) -> None:
    run = project.start()
    said = project.http(claude("SessionStart", source="startup"), "session-start", token=None)
    told = said["hookSpecificOutput"]["additionalContext"]
    assert "waypost token issue" in told
    assert run not in told
    assert project.http(claude("SessionStart", session="s-none", source="startup"),
                        "session-start") == {}  # a live token, no run: nothing to say


# --- a caller that can never succeed is let stop after the cap --------------------------------


@pytest.mark.parametrize("how", ["revoked", "expired"])
def test_a_dead_tokens_stops_end_after_the_cap_for_good(tmp_path: Path, how: str) -> None:
    store_url = str(tmp_path / "w.db")
    with waypost.open_store(store_url) as store:
        run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                               target="none:", worker="w1", session=SESSION)
        if how == "revoked":
            secret, grant = tokens.issue(store, holder="w1", role="worker", run_id=run.id,
                                         ttl=None, by="test")
            tokens.revoke(store, grant.id)
        else:
            secret, grant = tokens.issue(store, holder="w1", role="worker", run_id=run.id,
                                         by="test", ttl=timedelta(seconds=1),
                                         now=utcnow() - timedelta(hours=1))
    with serving(store_url) as url:
        project = Project(tmp_path, url, secret, store_url)
        for _ in range(3):
            reason = blocks(project.http(claude(), cap="3"))
            assert f"the token for this hook ({grant.id}) " in reason
        let_go = project.http(claude(), cap="3")["systemMessage"]
    for text in (reason, let_go):
        assert "waypost token issue" in text
        assert "hook config" in text
        assert run.id not in text
        assert "flaky" not in text
        assert "blocker" not in text
    assert "refused a stop 3 times in a row" in let_go
    with serving(store_url) as url:  # counted in the store: a restart changes nothing
        again = Project(tmp_path, url, secret, store_url).http(claude(session="another"), cap="3")
        assert "decision" not in again
        assert "at every later stop with it" in again["systemMessage"]
    assert project.packet(run.id).version == 1
    assert not project.packet(run.id).open_blockers


def test_a_missing_tokens_stops_end_after_the_cap_per_session(project: Project) -> None:
    run = project.start()
    for _ in range(2):
        blocks(project.http(claude(), token=None, cap="2"))
    blocks(project.http(claude(session="another"), token=None, cap="2"))  # its own count
    let_go = project.http(claude(), token=None, cap="2")["systemMessage"]
    assert "carries no waypost token" in let_go
    assert "waypost token issue" in let_go
    assert run not in let_go
    blocks(project.http(claude(), token=None, cap="2"))  # counting again
    assert project.packet(run).version == 1


# --- a token that may not write the run never moves the run's count ---------------------------


def test_a_viewers_stops_never_count_on_the_run(project: Project) -> None:
    run = project.start()
    viewer = issue(project.store_url, "bob", "viewer", run_id=run)
    for _ in range(2):
        assert f"run {run} is in_progress" in blocks(project.http(claude(), token=viewer, cap="2"))
    let_go = project.http(claude(), token=viewer, cap="2")["systemMessage"]
    assert "may not record that on the session's run" in let_go
    assert f"waypost token issue --holder WORKER --role worker --run {run}" in let_go
    assert project.packet(run).version == 1  # no blocker, no event
    for _ in range(2):  # the worker's count starts at 0: the viewer's stops were not in it
        blocks(project.http(claude(), cap="2"))
    gave_up = project.http(claude(), cap="2")["systemMessage"]
    assert f"recorded blocker b1 on run {run}" in gave_up
    (blocker,) = project.packet(run).open_blockers
    assert blocker.opened_by == "w1"


def test_a_token_for_another_run_learns_nothing_of_the_sessions_run(
        project: Project) -> None:
    run = project.start()
    other = project.start(session="other-session")
    elsewhere = issue(project.store_url, "w1", "worker", run_id=other)
    for _ in range(2):
        reason = blocks(project.http(claude(), token=elsewhere, cap="2"))
        assert "may not read this session's run" in reason
        assert run not in reason
    let_go = project.http(claude(), token=elsewhere, cap="2")["systemMessage"]
    assert "refused 2 times in a row" in let_go
    assert run not in let_go
    assert project.packet(run).version == 1


def test_a_viewer_attaches_no_session_to_a_named_run(project: Project) -> None:
    run = project.start(session="parent-session")
    viewer = issue(project.store_url, "bob", "viewer", run_id=run)
    start = claude("SessionStart", session="worker-session", source="startup")
    told = project.http(start, "session-start", token=viewer, run=run)
    assert "may not block" in told["hookSpecificOutput"]["additionalContext"]
    blocks(project.http(claude(session="worker-session"), token=viewer, run=run))
    with waypost.open_store(project.store_url) as store:
        assert store.session_run("worker-session") is None


def test_a_token_that_may_not_read_the_run_is_told_nothing_of_it_at_start_or_prompt(
        project: Project) -> None:
    """A session attached to run A; a token scoped to another run asks for the session's
    context: it is told it may not read the run, and nothing of A (id, title, state)."""
    with waypost.open_store(project.store_url) as store:
        run, _ = waypost.start(store, "Rotate the staging keys", actor="alice", owner="alice",
                               target="none:", worker="w1", session=SESSION)
    other = project.start(session="other-session")
    scoped = {"worker": issue(project.store_url, "w1", "worker", run_id=other),
              "viewer": issue(project.store_url, "bob", "viewer", run_id=other)}
    asked = {"session-start": claude("SessionStart", source="startup"),
             "user-prompt-submit": claude("UserPromptSubmit", prompt="go on")}
    for who, token in scoped.items():
        for event, data in asked.items():
            said = json.dumps(project.http(data, event, token=token))
            assert "may not read this session's run" in said, (who, event, said)
            for secret in (run.id, "Rotate the staging keys", "in_progress"):
                assert secret not in said, (who, event, secret, said)
    told = project.http(asked["session-start"], "session-start")  # w1's own token may read
    assert run.id in json.dumps(told)
