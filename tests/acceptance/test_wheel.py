"""The package as a user installs it: a wheel built from this tree carries every room, each
backend's schema and migrations, the board's templates and assets, and a store opens,
migrates and verifies from the installed wheel alone (not from the source tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "waypost"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the files git would commit, so that no earlier build's
    leftovers (build/, egg-info) can stand in for what the package data says."""
    tree, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("wheel")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(out), str(tree)], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [built] = out.glob("waypost-*.whl")
    return built


def test_the_wheel_holds_every_module_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "src/waypost"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    wanted = {p.removeprefix("src/") for p in tracked}
    assert wanted - names == set()
    assert {"waypost/store/sqlite/sqlite.sql", "waypost/store/postgres/postgres.sql",
            "waypost/py.typed"} <= names


def test_a_store_opens_and_verifies_from_the_installed_wheel(wheel: Path,
                                                              tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(site), str(wheel)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    code = ("import waypost, sys\n"
            "from waypost.core.history import verify_run\n"
            "from waypost.store.sqlite import setup\n"
            "store = waypost.open_store(sys.argv[1])\n"
            "run, _ = waypost.start(store, 'from a wheel', actor='o', owner='o',\n"
            "                       target='none:', kind=waypost.Kind.BOUNDED)\n"
            "print(waypost.__file__)\n"
            "verify_run(run.id, store.events(run.id), store.get(run.id))\n"
            "print(len(setup.MIGRATIONS), store.get(run.id).state)\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "w.db")], env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    where, result = proc.stdout.splitlines()
    assert Path(where).is_relative_to(site)
    assert result == "15 in_progress"
    proc = subprocess.run([sys.executable, "-m", "waypost", "verify"], env={
        **env, "WAYPOST_URL": str(tmp_path / "w.db")}, capture_output=True, text=True,
        check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
