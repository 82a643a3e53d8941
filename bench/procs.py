"""Running the installed console script end to end, as a user's shell would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bench.harness import elapsed_ms

PYTHON_PASS = "python -c pass"
# what the hot verbs import from outside the standard library (they skip click), loaded as
# they load it: msgspec with typing_extensions hidden and platform stood in for
# (waypost.cli.import_msgspec_lean)
FLOOR_MODULES = "msgspec, sqlite3"
FLOOR = f"dependency floor: import {FLOOR_MODULES}"
# what a heartbeat imports without the command line: the use cases and the SQLite store
LIBRARY_MODULES = "waypost.usecases.runs, waypost.store.sqlite.store"
LIBRARY = "library floor: import the use cases and the SQLite store"
_AS_THE_HOT_VERBS_DO = ("import os, sys, types; platform = types.ModuleType('platform'); "
                        "platform.system = lambda: os.uname().sysname; "
                        "sys.modules.update(typing_extensions=None, platform=platform); "
                        "import msgspec; "
                        "del sys.modules['typing_extensions'], sys.modules['platform']; ")


def waypost_script() -> str:
    """The `waypost` console script installed beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("waypost")
    if beside.is_file():
        return str(beside)
    found = shutil.which("waypost")
    if found is None:
        raise SystemExit("bench: the waypost console script is not installed "
                         "(pip install -e .)")
    return found


def timed(argv: Sequence[str], env: Mapping[str, str]) -> Callable[[], float]:
    """A sample: run `argv` once, wall-clock milliseconds; a failure stops the benchmark."""

    def sample() -> float:
        proc: list[subprocess.CompletedProcess[bytes]] = []
        ms = elapsed_ms(lambda: proc.append(subprocess.run(
            list(argv), env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            check=False)))
        if proc[0].returncode != 0:
            raise SystemExit(f"bench: {' '.join(argv)} exited {proc[0].returncode}: "
                             f"{proc[0].stderr.decode(errors='replace').strip()}")
        return ms

    return sample


def environment(store: Path, actor: str, pycache: Path) -> dict[str, str]:
    """The environment of a user's shell: bytecode is cached (as an installed package's is),
    here in the scratch directory so the work tree stays clean; the first, discarded round
    of every measurement fills the cache."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("WAYPOST_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(WAYPOST_URL=str(store), WAYPOST_ACTOR=actor, PYTHONPYCACHEPREFIX=str(pycache))
    return env


def python_pass() -> list[str]:
    return [sys.executable, "-c", "pass"]


def python_import(modules: str) -> list[str]:
    """`python -c "import …"`, msgspec loaded as the hot verbs load it, and ended as they
    end (`os._exit`, no teardown: waypost.cli.exit_now)."""
    return [sys.executable, "-c",
            f"{_AS_THE_HOT_VERBS_DO}import {modules}; import os; os._exit(0)"]
