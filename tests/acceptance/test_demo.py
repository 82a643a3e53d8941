"""The README's first command: a real end-to-end run on a fresh SQLite store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_demo_runs_the_whole_flow(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    exe = shutil.which("waypost", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "waypost"]
    proc = subprocess.run([*command, "demo", "--dir", str(tmp_path / "d")], capture_output=True,
                          text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    for step in ("waypost start", "waypost claim", "waypost heartbeat", "waypost block",
                 "waypost unblock", "waypost artifact add", "waypost evidence run",
                 "waypost ready", "waypost review", "waypost approve", "waypost deliver",
                 "waypost show", "Release notes for 1.5", "ok: 1 run(s) verified"):
        assert step in proc.stdout, step
    as_json = subprocess.run([*command, "demo", "--json", "--dir", str(tmp_path / "j")],
                             capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    packet = json.loads(as_json.stdout)
    assert packet["state"] == "delivered"
    assert packet["receipt"]["key"] == f"{packet['id']}.final"
    assert [e["verdict"] for e in packet["evidence"]][:2] == ["passed", "skipped"]
    assert (tmp_path / "j" / "result.md").read_text().count("Release notes for 1.5") == 1
    assert (tmp_path / "j" / ".waypost" / "waypost.db").is_file()
