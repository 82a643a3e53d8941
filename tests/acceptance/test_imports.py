"""The hot verbs stay light: no HTTP, MCP or PostgreSQL stack is imported, nor click (a
plainly written hot verb runs on the fast path of `waypost.cli`), nor the costly standard
modules that waypost itself could do without, and the packet's decoder is cheap to build.
They end without the interpreter's teardown, yet with all their output, their exit code,
and, under a profiler, its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import waypost
from waypost import cli, events, model
from waypost.cli import hot
from waypost.errors import NotFound

HEAVY = ("httpx", "litestar", "mcp", "psycopg", "psycopg_pool", "jinja2", "detect_secrets",
         "uvicorn", "anyio")
# ~20 ms between them: typing_extensions and platform (see waypost.cli.console), hashlib
# (OpenSSL), pathlib (urllib.parse, ipaddress), threading
AVOIDABLE = ("typing_extensions", "platform", "hashlib", "_hashlib", "pathlib", "threading")


def imported_modules(args: list[str], store: Path) -> set[str]:
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "waypost", *args],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = importtime_modules(proc.stderr)
    assert "waypost.cli" in names  # the importtime output was really read
    return names


def importtime_modules(stderr: str) -> set[str]:
    """The modules that `python -X importtime` lists on stderr."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.fixture(scope="module")
def run_in_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("imports") / "w.db"
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    run_id = subprocess.run([sys.executable, "-m", "waypost", "start", "light"],
                            capture_output=True, text=True, env=env, check=True).stdout.strip()
    return store, run_id


@pytest.mark.parametrize("verb", [
    ["heartbeat", "{run}", "--note", "n"],
    ["show", "{run}", "--json"],
    ["show", "{run}"],
    ["show", "{run}", "--a2a"],
    ["block", "{run}", "--kind", "other", "--detail", "the disk is full"],
    ["ls"],
])
def test_hot_verbs_import_nothing_heavy(run_in_store: tuple[Path, str], verb: list[str]) -> None:
    store, run_id = run_in_store
    names = imported_modules([part.format(run=run_id) for part in verb], store)
    heavy = sorted(n for n in names if n.split(".")[0] in HEAVY)
    assert heavy == []
    assert sorted(n for n in names if n.split(".")[0] == "click") == []


def test_wait_on_a_sqlite_store_imports_no_server_stack(
        run_in_store: tuple[Path, str]) -> None:
    """`wait` is no hot verb (it waits), but on SQLite it loads no HTTP, MCP or PostgreSQL
    stack: its follower asks the store whether it can LISTEN, never imports a driver."""
    store, run_id = run_in_store
    every = "in_progress,blocked,ready_for_review,approved,delivered,cancelled"
    names = imported_modules(["wait", run_id, "--until", every, "--timeout", "0"], store)
    assert "waypost.usecases.waiting" in names
    assert sorted(n for n in names if n.split(".")[0] in HEAVY) == []


# `python -m waypost ...`, printing the modules loaded when a hot verb ends its process
# (`cli.exit_now`; importtime also lists an import that was refused, as typing_extensions
# is while msgspec loads)
LOADED_AT_EXIT = (
    "import os, runpy, sys\n"
    "def end(code, _exit=os._exit):\n"
    "    print(*sorted(n for n, m in sys.modules.items() if m), file=sys.stderr)\n"
    "    sys.stderr.flush()\n"
    "    _exit(code)\n"
    "os._exit = end\n"
    "sys.argv[0] = 'waypost'\n"
    "runpy.run_module('waypost', run_name='__main__', alter_sys=True)\n")


@pytest.mark.parametrize("verb", [
    ["heartbeat", "{run}", "--note", "n"],
    ["show", "{run}", "--json"],
    ["block", "{run}", "--kind", "other", "--detail", "the printer is out of toner"],
    ["ls"],
])
def test_hot_verbs_skip_costly_standard_modules(run_in_store: tuple[Path, str],
                                                verb: list[str]) -> None:
    store, run_id = run_in_store
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    proc = subprocess.run([sys.executable, "-c", LOADED_AT_EXIT,
                           *[part.format(run=run_id) for part in verb]],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stderr.split())
    assert {"msgspec", "waypost.cli", "waypost.model"} <= loaded
    assert sorted(loaded & set(AVOIDABLE)) == []


def test_show_loads_the_a2a_projection_only_when_asked(run_in_store: tuple[Path, str]) -> None:
    store, run_id = run_in_store
    assert "waypost.usecases.a2a" not in imported_modules(["show", run_id, "--json"], store)
    assert "waypost.usecases.a2a" in imported_modules(["show", run_id, "--a2a"], store)


HOOK_INPUTS = {  # (host, event): the host's input naming the run's session (see below)
    ("claude", "stop"): {"hook_event_name": "Stop", "session_id": "s-imports"},
    ("claude", "subagent-stop"): {"hook_event_name": "SubagentStop", "session_id": "s-parent",
                                  "agent_id": "s-imports"},
    ("claude", "session-start"): {"hook_event_name": "SessionStart", "session_id": "s-imports"},
    ("claude", "user-prompt-submit"): {"hook_event_name": "UserPromptSubmit",
                                       "session_id": "s-imports"},
    ("codex", "stop"): {"hook_event_name": "Stop", "session_id": "s-imports", "turn_id": "t"},
    ("codex", "subagent-stop"): {"hook_event_name": "SubagentStop", "session_id": "s-parent",
                                 "agent_id": "s-imports"},
    ("codex", "session-start"): {"hook_event_name": "SessionStart", "session_id": "s-imports"},
    ("codex", "user-prompt-submit"): {"hook_event_name": "UserPromptSubmit",
                                      "session_id": "s-imports"},
    ("gemini", "stop"): {"hook_event_name": "AfterAgent", "session_id": "s-imports"},
    ("gemini", "session-start"): {"hook_event_name": "SessionStart", "session_id": "s-imports"},
    ("gemini", "user-prompt-submit"): {"hook_event_name": "BeforeAgent",
                                       "session_id": "s-imports"},
    ("cursor", "stop"): {"hook_event_name": "stop", "conversation_id": "s-imports",
                         "generation_id": "g1", "loop_count": 0},
    ("cursor", "subagent-stop"): {"hook_event_name": "subagentStop",
                                  "conversation_id": "s-parent", "subagent_id": "s-imports"},
    ("cursor", "session-start"): {"hook_event_name": "sessionStart", "session_id": "s-imports"},
}


def test_every_hosts_every_event_is_covered() -> None:
    from waypost.hooks.hosts import EVENT_NAMES

    assert set(HOOK_INPUTS) == {(h, e) for h, events in EVENT_NAMES.items() for e in events}


@pytest.fixture(scope="module")
def session_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose run belongs to session s-imports, with a worker (the handoff brief)."""
    store = tmp_path_factory.mktemp("hooks") / "w.db"
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    subprocess.run([sys.executable, "-m", "waypost", "start", "light", "--worker", "w1",
                    "--session", "s-imports"], capture_output=True, env=env, check=True)
    return store


@pytest.mark.parametrize(("host", "event"), list(HOOK_INPUTS))
def test_the_hooks_import_nothing_heavy(session_store: Path, host: str, event: str) -> None:
    """`waypost hook` runs on every stop and every prompt of an agent: a hot verb like the
    others, whatever the host and the event."""
    env = {**os.environ, "WAYPOST_URL": str(session_store)}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "waypost", "hook", event,
                           "--host", host], input=json.dumps(HOOK_INPUTS[host, event]),
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "waypost hook failed" not in proc.stdout  # the whole way, to the run's answer
    assert "light" in proc.stdout or "HANDOFF" in proc.stdout or event.endswith("stop")
    names = importtime_modules(proc.stderr)
    assert "waypost.cli.hook" in names
    assert sorted(n for n in names if n.split(".")[0] in (*HEAVY, "click")) == []
    if event != "session-start":  # once a session may cost more: the brief reads the history
        assert sorted(names & {n for n in AVOIDABLE if n != "typing_extensions"}) == []


def test_the_entry_knows_the_hot_verbs() -> None:
    assert sorted(cli.HOT_VERBS) == sorted(hot.HOT)
    assert set(cli.HASHING) < set(cli.HOT_VERBS)  # the writing ones choose the quick hash


def test_msgspec_loaded_lean_reads_packets_the_same(run_in_store: tuple[Path, str]) -> None:
    """typing_extensions is hidden and platform stood in for only while msgspec loads (both
    import as usual after), and msgspec reads and writes a packet byte for byte as it does
    with them."""
    store, run_id = run_in_store
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    shown = subprocess.run([sys.executable, "-m", "waypost", "show", run_id, "--json"],
                           capture_output=True, env=env, check=True).stdout
    code = ("import sys\n"
            "from waypost.cli import import_msgspec_lean as lean\n"
            "lean()\n"
            "assert 'msgspec' in sys.modules and 'uuid' in sys.modules\n"
            "assert 'typing_extensions' not in sys.modules and 'platform' not in sys.modules\n"
            "from waypost import model\n"
            "packet = model.from_json(sys.stdin.buffer.read(), model.Packet)\n"
            "import typing_extensions\n"
            "sys.stdout.buffer.write(model.to_json(packet))\n")
    lean = subprocess.run([sys.executable, "-c", code], input=shown, capture_output=True,
                          check=False)
    assert lean.returncode == 0, lean.stderr.decode()
    assert "typing_extensions" in sys.modules  # this process loaded msgspec as usual
    assert lean.stdout == model.to_json(model.from_json(shown, model.Packet))
    assert b'"id":"' + run_id.encode() in lean.stdout


def python_c(code: str) -> str:
    """What `python -c CODE` printed, in a process of its own; it must succeed."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("uuid_first", [False, True])
def test_a_msgspec_that_cannot_load_lean_loads_as_usual_with_the_same_uuid(
        uuid_first: bool) -> None:
    """When msgspec fails to import so, it is imported again as usual; uuid, loaded the
    first time (beside the stand-in, or before), stays the module whose UUID class
    msgspec's core knows."""
    code = ("import importlib.abc, json, sys\n"
            f"if {uuid_first}:\n"
            "    import uuid\n"
            "class Refuse(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'msgspec.msgpack':  # after msgspec's core and uuid\n"
            "            raise ImportError('refused here')\n"
            "sys.meta_path.insert(0, Refuse())\n"
            "from waypost.cli import import_msgspec_lean as lean\n"
            "lean()\n"
            "sys.meta_path.pop(0)\n"
            "first = sys.modules['uuid']\n"
            "gone = 'msgspec' not in sys.modules\n"
            "import msgspec, platform, uuid\n"
            "made = uuid.uuid4()\n"
            "read = msgspec.json.decode(msgspec.json.encode(made), type=uuid.UUID)\n"
            "print(json.dumps([gone, uuid is first, read == made,\n"
            "                  hasattr(platform, 'python_version')]))\n")
    assert json.loads(python_c(code)) == [True, True, True, True]


def test_uuid_loaded_lean_knows_its_platform_as_usual() -> None:
    """uuid, imported beside the stand-in for platform, decided what it decides from
    `platform.system()` as it does with the real module, which any later import gets."""
    code = ("import json, sys\n"
            "from waypost.cli import import_msgspec_lean as lean\n"
            "lean()\n"
            "import platform, uuid\n"
            "print(json.dumps([platform.system(), platform.python_implementation(),\n"
            "                  getattr(uuid, '_AIX', None), getattr(uuid, '_LINUX', None),\n"
            "                  uuid.UUID(int=7).hex]))\n")
    shown = python_c(code)
    import platform
    import uuid

    assert json.loads(shown) == [platform.system(), platform.python_implementation(),
                                       getattr(uuid, "_AIX", None),
                                       getattr(uuid, "_LINUX", None), uuid.UUID(int=7).hex]


def loaded_by_help(args: list[str]) -> tuple[str, set[str]]:
    """What `waypost ARGS` (a help) printed, and every module loaded by its end."""
    code = ("import sys\n"
            "from waypost.cli import main\n"
            "code = main(sys.argv[1:])\n"
            "print(*sorted(sys.modules), file=sys.stderr)\n"
            "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stderr.split())
    assert "waypost.cli" in loaded  # the module list was really read
    return proc.stdout, loaded


@pytest.mark.parametrize("args", [["--help"], ["mcp", "--help"]])
def test_the_mcp_verb_loads_no_sdk_until_it_serves(args: list[str]) -> None:
    """The help (which names `mcp`) and the verb's own help load no MCP SDK."""
    printed, loaded = loaded_by_help(args)
    assert "mcp" in printed
    assert "waypost.cli.app" in loaded
    assert sorted(n for n in loaded if n.split(".")[0] in HEAVY) == []
    if args[0] == "mcp":
        assert "waypost.cli.mcp" in loaded


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["token", "ls", "--help"]])
def test_the_serve_verb_loads_no_server_stack_until_it_serves(args: list[str]) -> None:
    """The help (which names `serve`) and the verb's own help load no Litestar, uvicorn or
    Jinja2, and no module of waypost.http: only `waypost serve` itself does."""
    printed, loaded = loaded_by_help(args)
    assert "serve" in printed or args[0] == "token"
    assert sorted(n for n in loaded if n.split(".")[0] in HEAVY) == []
    assert sorted(n for n in loaded if n.startswith("waypost.http")) == []


def test_other_command_lines_go_through_click(run_in_store: tuple[Path, str]) -> None:
    store, run_id = run_in_store
    assert "click" in imported_modules(["heartbeat", run_id, "--help"], store)
    assert "click" in imported_modules(["claim", run_id], store)


def test_record_annotations_are_evaluated() -> None:
    """msgspec builds a decoder from the records' annotations; as strings (`from __future__
    import annotations`) it would resolve each one first, in every command that reads one."""
    records = [v for v in [*vars(model).values(), *vars(events).values()]
               if isinstance(v, type) and issubclass(v, model.Record)]
    assert model.Packet in records
    assert events.Started in records
    strings = sorted(f"{cls.__name__}.{name}" for cls in records
                     for name, hint in vars(cls).get("__annotations__", {}).items()
                     if isinstance(hint, str))
    assert strings == []


def test_one_shot_processes_hash_events_without_openssl() -> None:
    """A hot verb's process hashes with Python's own SHA-256; a library keeps OpenSSL's."""
    import hashlib

    from waypost.core import history

    assert history.sha256(b"waypost").hexdigest() == hashlib.sha256(b"waypost").hexdigest()
    assert history._sha256 is hashlib.sha256  # this process is a library's: OpenSSL
    code = ("import sys\n"
            "from waypost.core import history\n"
            "history.prefer_quick_start()  # as waypost.cli.console does for a hot verb\n"
            "print(history.sha256(b'waypost').hexdigest())\n"
            "assert 'hashlib' not in sys.modules, 'OpenSSL was loaded'\n")
    assert python_c(code).strip() == hashlib.sha256(b"waypost").hexdigest()


# --- a hot verb ends its process without the interpreter's teardown (cli.exit_now) ------


def ended_early_env(store: Path) -> dict[str, str]:
    """The environment of a hot verb's process, with stdout block-buffered as for most users
    (not PYTHONUNBUFFERED): what is still in a buffer when the process ends is lost."""
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def waypost_process(args: list[str], store: Path, stdout: Any = subprocess.PIPE
                    ) -> subprocess.Popen[bytes]:
    env = ended_early_env(store)
    return subprocess.Popen([sys.executable, "-m", "waypost", *args], env=env, stdout=stdout,
                            stderr=subprocess.PIPE)


def test_a_hot_verb_that_ends_early_still_delivers_all_its_output(tmp_path: Path) -> None:
    """Hundreds of runs listed to a pipe arrive whole, and the store is left closed."""
    store_path = tmp_path / "w.db"
    with waypost.open_store(str(store_path)) as store:
        started = {waypost.start(store, f"run {n}: " + "x" * 200, actor="alice",
                                 owner="alice", target="none:")[0].id for n in range(300)}
    proc = waypost_process(["ls", "--json", "--limit", "1000"], store_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert {row["id"] for row in json.loads(out)["runs"]} == started
    assert not (tmp_path / "w.db-wal").exists()  # closed: checkpointed before the end


def test_a_hot_verb_that_ends_early_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    with waypost.open_store(str(tmp_path / "w.db")) as store:
        run, _ = waypost.start(store, "short", actor="alice", owner="alice", target="none:",
                               worker="alice")
    beat = waypost_process(["heartbeat", run.id], tmp_path / "w.db")
    assert beat.communicate(timeout=60)[0] == f"{run.id} in_progress v2\n".encode()
    assert beat.returncode == 0
    proc = waypost_process(["show", "wp_nosuchrun", "--json"], tmp_path / "w.db")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == NotFound.exit_code == 4
    assert out == b""
    assert json.loads(err)["error"]["code"] == "not_found"


def test_a_hot_verb_writing_to_a_closed_pipe_ends_as_before(tmp_path: Path) -> None:
    """`waypost ls | head -0`: exit code 1, no traceback, as before it ended early."""
    store_path = tmp_path / "w.db"
    with waypost.open_store(str(store_path)) as store:
        for n in range(200):
            waypost.start(store, f"run {n}: " + "y" * 200, actor="alice", owner="alice",
                          target="none:")
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write fails
    try:
        proc = waypost_process(["ls"], store_path, stdout=write)
    finally:
        os.close(write)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert b"Traceback" not in err


def test_a_hot_verb_started_without_stdout_or_stderr_keeps_its_exit_code(
        tmp_path: Path) -> None:
    """A closed descriptor makes the stream None: the heartbeat is written and exits 0, and
    an error still exits with its own code."""
    store_path = tmp_path / "w.db"
    with waypost.open_store(str(store_path)) as store:
        run, _ = waypost.start(store, "quiet", actor="alice", owner="alice", target="none:",
                               worker="alice")
    env = ended_early_env(store_path)
    closed = ["sh", "-c", 'exec "$@" >&- 2>&-', "sh", sys.executable, "-m", "waypost"]
    beat = subprocess.run([*closed, "heartbeat", run.id], env=env, check=False)
    missing = subprocess.run([*closed, "show", "wp_nosuchrun"], env=env, check=False)
    assert (beat.returncode, missing.returncode) == (0, NotFound.exit_code)
    with waypost.open_store(str(store_path)) as store:
        assert store.get(run.id).progress.last_heartbeat is not None


def test_a_hot_verb_under_a_profiler_ends_as_usual_so_the_profile_is_written(
        tmp_path: Path) -> None:
    with waypost.open_store(str(tmp_path / "w.db")):
        pass
    env = {**os.environ, "WAYPOST_URL": str(tmp_path / "w.db")}
    profile = tmp_path / "ls.prof"
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m",
                           "waypost", "ls"], env=env, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert profile.stat().st_size > 0


def test_the_state_machine_loads_without_store_cli_or_delivery() -> None:
    """`import waypost.core.machine` in a fresh interpreter loads the vocabulary and the
    core alone: no store, CLI, delivery or use-case module."""
    code = ("import sys, waypost.core.machine\n"
            "print(*sorted(n for n in sys.modules if n.startswith('waypost')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert "waypost.core.machine" in loaded
    outside = sorted(n for n in loaded if n not in {"waypost", "waypost.core"}
                     and not n.startswith(("waypost.core.", "waypost.model."))
                     and n not in {"waypost.errors", "waypost.model", "waypost.events",
                                   "waypost.durations", "waypost.config"})
    assert outside == []
