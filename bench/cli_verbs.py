"""2. CLI hot verbs end to end: `waypost heartbeat RUN` and `waypost show RUN --json`, each a
fresh process of the installed console script, against `python -c pass` (the floor any
Python command line pays) and two `python -c 'import …'` floors (the dependencies the hot
verbs load; the library a heartbeat needs, without its command line), interleaved one
invocation at a time."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Mapping
from pathlib import Path

import waypost
from bench import procs
from bench.harness import Section, Target, figures, interleave

HEARTBEAT = "waypost heartbeat RUN"
SHOW = "waypost show RUN --json"
HEARTBEAT_RATIO = "heartbeat / python -c pass"
SHOW_RATIO = "show --json / python -c pass"
FLOOR_RATIO = "dependency floor / python -c pass"
HEAVY = ("httpx", "litestar", "mcp", "psycopg", "click")
LIGHT_TARGET = f"hot verbs (heartbeat, show, ls, block) import none of {', '.join(HEAVY)}"


def claimed_run(path: Path, worker: str) -> str:
    store = waypost.open_store(str(path))
    try:
        run, _ = waypost.start(store, "Benchmark: the CLI's hot verbs", actor="owner",
                               owner="owner", target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=1800, heartbeat_interval=300)
        waypost.Run(store, run.id, actor=worker).claim()
        return run.id
    finally:
        store.close()


def run(folder: Path, *, rounds: int) -> Section:
    section = Section(key="cli", title="2. CLI hot verbs, end to end (one process each)",
                      unit="ms", higher_is_better=False)
    path = folder / "cli.db"
    run_id = claimed_run(path, "worker-1")
    env = procs.environment(path, "worker-1", folder / "pycache")
    script = procs.waypost_script()
    samples = interleave({
        procs.PYTHON_PASS: procs.timed(procs.python_pass(), env),
        procs.FLOOR: procs.timed(procs.python_import(procs.FLOOR_MODULES), env),
        procs.LIBRARY: procs.timed(procs.python_import(procs.LIBRARY_MODULES), env),
        HEARTBEAT: procs.timed([script, "heartbeat", run_id], env),
        SHOW: procs.timed([script, "show", run_id, "--json"], env),
    }, rounds + 1)
    section.figures = figures({name: values[1:] for name, values in samples.items()})
    section.add_ratio(HEARTBEAT_RATIO, HEARTBEAT, procs.PYTHON_PASS)
    section.add_ratio(SHOW_RATIO, SHOW, procs.PYTHON_PASS)
    section.add_ratio(FLOOR_RATIO, procs.FLOOR, procs.PYTHON_PASS)
    section.add_ratio("library floor / python -c pass", procs.LIBRARY, procs.PYTHON_PASS)
    section.add_ratio("heartbeat / library floor", HEARTBEAT, procs.LIBRARY)
    section.notes.append(f"{rounds} interleaved rounds after one discarded warm-up round; "
                         "bytecode cached as for an installed package")
    section.notes.append(environment_note())
    section.targets = [light_verbs(script, run_id, env)]
    return section


def environment_note() -> str:
    """Which environment was measured, and what in it weighs on the hot verbs."""
    found = importlib.util.find_spec("typing_extensions") is not None
    return ("measured with the bench's own interpreter and packages (the same startup and, "
            "for these verbs, the same imports as a runtime-only `pip install -e .`); "
            f"typing_extensions is {'installed' if found else 'absent'}: msgspec imports it "
            "when installed (about 10 ms; httpx brings it in, so every install has it), and "
            "the hot verbs hide it while msgspec loads, and stand in for platform, which uuid "
            "imports for one call before Python 3.13 (waypost.cli.console), as both floors here "
            "do; both floors also end as the hot verbs do, without the interpreter's teardown")


def light_verbs(script: str, run_id: str, env: Mapping[str, str]) -> Target:
    """Which heavy stacks the hot verbs import (PYTHONPROFILEIMPORTTIME lists every module)."""
    found: dict[str, set[str]] = {}
    for verb in (["heartbeat", run_id], ["show", run_id, "--json"], ["ls"],
                 ["block", run_id, "--kind", "other", "--detail", "import check"]):
        proc = subprocess.run([script, *verb], env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
                              capture_output=True, text=True, check=False)
        modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                   if line.startswith("import time:") and "|" in line}
        if proc.returncode != 0 or "waypost.cli" not in modules:
            raise SystemExit(f"bench: waypost {verb[0]} failed: {proc.stderr[-500:]}")
        found[verb[0]] = {m for m in modules if m.split(".")[0] in HEAVY}
    heavy = {verb: sorted(names) for verb, names in found.items() if names}
    return Target(text=LIGHT_TARGET, value=None, limit=0.0, at_least=True,
                  status="MISS" if heavy else "PASS",
                  detail=f"imported: {heavy}" if heavy else "checked each verb's imports")
