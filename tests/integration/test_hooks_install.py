"""`waypost hooks install|uninstall --host claude`: waypost's Stop hook merged into Claude
Code's settings.json, idempotently, every other hook and setting kept; uninstall restores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Cli

OURS = {"hooks": [{"type": "command", "command": "waypost hook stop --host claude"}]}
EXISTING: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash",
                        "hooks": [{"type": "command", "command": "check-bash", "timeout": 5}]}],
        "SessionStart": [],
    },
    "env": {"FOO": "bar"},
}


def settings(root: Path) -> Any:
    return json.loads((root / ".claude" / "settings.json").read_text())


def test_install_twice_is_one_entry_and_uninstall_restores(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(EXISTING))
    assert cli.ok("hooks", "install", "--host", "claude").startswith("installed:")
    once = settings(tmp_path)
    assert cli.ok("hooks", "install", "--host", "claude").startswith("unchanged:")
    assert settings(tmp_path) == once
    assert once["hooks"]["Stop"] == [*EXISTING["hooks"]["Stop"], OURS]
    assert {k: v for k, v in once.items() if k != "hooks"} == {
        k: v for k, v in EXISTING.items() if k != "hooks"}
    assert once["hooks"]["PreToolUse"] == EXISTING["hooks"]["PreToolUse"]
    assert cli.ok("hooks", "uninstall", "--host", "claude").startswith("removed:")
    assert settings(tmp_path) == EXISTING
    assert cli.ok("hooks", "uninstall", "--host", "claude").startswith("unchanged:")


def test_install_into_no_file_and_back(cli: Cli, tmp_path: Path) -> None:
    cli.ok("hooks", "install", "--host", "claude")
    assert settings(tmp_path) == {"hooks": {"Stop": [OURS]}}
    cli.ok("hooks", "uninstall", "--host", "claude")
    assert settings(tmp_path) == {}


def test_user_scope_writes_the_home_settings(cli: Cli, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    cli.ok("hooks", "install", "--host", "claude", "--scope", "user")
    assert settings(home) == {"hooks": {"Stop": [OURS]}}
    assert not (tmp_path / ".claude").exists()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"hooks": []}',
                                     '{"hooks": {"Stop": {}}}'])
def test_a_settings_file_it_cannot_read_is_left_alone(cli: Cli, tmp_path: Path,
                                                      content: str) -> None:
    (tmp_path / ".claude").mkdir()
    path = tmp_path / ".claude" / "settings.json"
    path.write_text(content)
    outcome = cli("hooks", "install", "--host", "claude", "--json")
    assert outcome.code == 2
    assert "nothing was changed" in outcome.error()["message"]
    assert path.read_text() == content


def test_a_symlinked_settings_file_stays_a_link(cli: Cli, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles.json"
    real.write_text(json.dumps(EXISTING))
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").symlink_to(real)
    cli.ok("hooks", "install", "--host", "claude")
    assert (tmp_path / ".claude" / "settings.json").is_symlink()
    assert json.loads(real.read_text())["hooks"]["Stop"][-1] == OURS
