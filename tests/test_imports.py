"""The hot verbs stay light: no HTTP, MCP or PostgreSQL stack is imported, nor click (a
plainly written hot verb runs on the fast path of `waypost.cli`), and the packet's decoder
is cheap to build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from waypost import model

HEAVY = ("httpx", "litestar", "mcp", "psycopg", "psycopg_pool", "jinja2", "detect_secrets",
         "uvicorn", "anyio")


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
    ["block", "{run}", "--kind", "other", "--detail", "the disk is full"],
    ["ls"],
])
def test_hot_verbs_import_nothing_heavy(run_in_store: tuple[Path, str], verb: list[str]) -> None:
    store, run_id = run_in_store
    names = imported_modules([part.format(run=run_id) for part in verb], store)
    heavy = sorted(n for n in names if n.split(".")[0] in HEAVY)
    assert heavy == []
    assert sorted(n for n in names if n.split(".")[0] == "click") == []


def test_other_command_lines_go_through_click(run_in_store: tuple[Path, str]) -> None:
    store, run_id = run_in_store
    assert "click" in imported_modules(["heartbeat", run_id, "--help"], store)
    assert "click" in imported_modules(["claim", run_id], store)


def test_record_annotations_are_evaluated() -> None:
    """msgspec builds a decoder from the records' annotations; as strings (`from __future__
    import annotations`) it would resolve each one first, in every command that reads one."""
    records = [v for v in vars(model).values()
               if isinstance(v, type) and issubclass(v, model.Record)]
    assert model.Packet in records
    strings = sorted(f"{cls.__name__}.{name}" for cls in records
                     for name, hint in vars(cls).get("__annotations__", {}).items()
                     if isinstance(hint, str))
    assert strings == []
