"""The README's curl lines (the HTTP API section: a worker, then the owner) work as
written against a real server: each answers 2xx, and the run ends approved. The same
lines without their Content-Type header (curl's default, a form type) are refused 415 and
change nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import waypost
from tests.helpers import dump_store
from tests.http_support import serving
from waypost.store import open_store
from waypost.usecases import tokens

README = Path(__file__).resolve().parents[2] / "README.md"


def _curl_lines() -> list[str]:
    """The `$ …` lines of the console blocks that set $API and call it, in order."""
    text = README.read_text("utf-8")
    start = text.index("$ API=http://127.0.0.1:8470")
    block_end = text.index("```", text.index("and the owner, with an owner token", start) + 40)
    lines = [line[2:] for line in text[start:block_end].splitlines() if line.startswith("$ ")]
    assert any("curl" in line for line in lines)
    return lines


def _run(script: str, cwd: Path) -> list[str]:
    done = subprocess.run(["bash", "-euc", script], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_readme_s_curl_lines_work_and_untyped_bodies_do_not(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url, create=True) as store:
        run, _ = waypost.start(store, "Fix the flaky login test", actor="alice",
                               owner="alice", target="none:",
                               kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
        worker = tokens.issue(store, holder="w1", role="worker", run_id=run.id, ttl=None,
                              by="test")[0]
        owner = tokens.issue(store, holder="alice", role="owner", run_id=None, ttl=None,
                             by="test")[0]
    (tmp_path / "report.md").write_text("# Report\n\nThe race is fixed: the session first.\n")
    lines = _curl_lines()
    with serving(url) as base:
        env = (f"export WAYPOST_TOKEN={worker} RUN={run.id} "
               f"OWNER='Authorization: Bearer {owner}'\n")
        setup = [line.replace("http://127.0.0.1:8470", base) for line in lines
                 if not line.startswith("curl")]
        calls = [line for line in lines if line.startswith("curl")]
        # untyped first: curl's own default type for -d and --data-binary is refused
        untyped = [re.sub(r' -H "\$(JSON|BYTES)"', "", c) for c in calls
                   if "$JSON" in c or "$BYTES" in c]
        before = dump_store(tmp_path / "store.db")
        statuses = _run(env + "\n".join(setup) + "\n" + "\n".join(
            f"{c} -o /dev/null -w '%{{http_code}}\\n'" for c in untyped), tmp_path)
        assert statuses == ["415"] * len(untyped), list(zip(untyped, statuses, strict=True))
        assert dump_store(tmp_path / "store.db") == before
        statuses = _run(env + "\n".join(setup) + "\n" + "\n".join(
            f"{c} -o /dev/null -w '%{{http_code}}\\n'" for c in calls), tmp_path)
    assert all(s.startswith("2") for s in statuses), list(zip(calls, statuses, strict=True))
    with open_store(url) as store:
        assert str(store.get(run.id).state) == "approved"
