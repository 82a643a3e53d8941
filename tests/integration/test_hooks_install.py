"""`waypost hooks install|uninstall --host H`: waypost's hooks merged into each host's own
settings file, idempotently, every other hook and setting kept; uninstall restores it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Cli


def group(command: str) -> dict[str, Any]:
    return {"hooks": [{"type": "command", "command": command}]}


# what each host's file holds after an install into no file, written out by hand
INSTALLED: dict[str, dict[str, Any]] = {
    "claude": {"hooks": {
        "Stop": [group("waypost hook stop --host claude")],
        "SubagentStop": [group("waypost hook subagent-stop --host claude")],
        "SessionStart": [group("waypost hook session-start --host claude")],
        "UserPromptSubmit": [group("waypost hook user-prompt-submit --host claude")]}},
    "codex": {"hooks": {
        "Stop": [group("waypost hook stop --host codex")],
        "SubagentStop": [group("waypost hook subagent-stop --host codex")],
        "SessionStart": [group("waypost hook session-start --host codex")],
        "UserPromptSubmit": [group("waypost hook user-prompt-submit --host codex")]}},
    "gemini": {"hooks": {
        "AfterAgent": [group("waypost hook stop --host gemini")],
        "SessionStart": [group("waypost hook session-start --host gemini")],
        "BeforeAgent": [group("waypost hook user-prompt-submit --host gemini")]}},
    "cursor": {"hooks": {
        "stop": [{"command": "waypost hook stop --host cursor"}],
        "subagentStop": [{"command": "waypost hook subagent-stop --host cursor"}],
        "sessionStart": [{"command": "waypost hook session-start --host cursor"}]}},
}
FILES = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json",
         "gemini": ".gemini/settings.json", "cursor": ".cursor/hooks.json"}
# a file each host's user already has: other hooks (on waypost's events too) and settings
EXISTING: dict[str, dict[str, Any]] = {
    "claude": {"model": "opus", "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},
               "hooks": {"Stop": [group("notify-send done")],
                         "PreToolUse": [{"matcher": "Bash", "hooks": [
                             {"type": "command", "command": "check-bash", "timeout": 5}]}],
                         "SessionStart": []},
               "env": {"FOO": "bar"}},
    "codex": {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "ruff check",
                                             "timeout": 30}]}],
                        "PreToolUse": [{"matcher": "Bash", "hooks": [
                            {"type": "command", "command": "guard.sh"}]}]}},
    "gemini": {"general": {"vimMode": True},
               "hooks": {"AfterAgent": [{"matcher": "*", "hooks": [
                   {"name": "rules", "type": "command", "command": "rules.sh"}]}],
                   "BeforeTool": [{"matcher": "write_file", "hooks": [
                       {"type": "command", "command": "scan.sh", "timeout": 5000}]}]}},
    "cursor": {"version": 1, "hooks": {"stop": [{"command": "./audit.sh", "loop_limit": 3}],
                                       "afterFileEdit": [{"command": "./format.sh"}]}},
}


def settings(root: Path, host: str) -> Any:
    return json.loads((root / FILES[host]).read_text())


def write(root: Path, host: str, content: str) -> Path:
    path = root / FILES[host]
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    return path


@pytest.mark.parametrize("host", list(FILES))
def test_install_twice_is_one_entry_each_and_uninstall_restores(cli: Cli, tmp_path: Path,
                                                                host: str) -> None:
    write(tmp_path, host, json.dumps(EXISTING[host]))
    assert cli.ok("hooks", "install", "--host", host).startswith("installed:")
    once = settings(tmp_path, host)
    assert cli.ok("hooks", "install", "--host", host).startswith("unchanged:")
    assert settings(tmp_path, host) == once
    before = EXISTING[host]["hooks"]
    for event, ours in INSTALLED[host]["hooks"].items():
        assert once["hooks"][event] == [*before.get(event, []), *ours]  # theirs first, kept
    for event, theirs in before.items():
        if event not in INSTALLED[host]["hooks"]:
            assert once["hooks"][event] == theirs
    assert {k: v for k, v in once.items() if k != "hooks"} == {
        k: v for k, v in EXISTING[host].items() if k != "hooks"}
    assert cli.ok("hooks", "uninstall", "--host", host).startswith("removed:")
    assert settings(tmp_path, host) == restored(EXISTING[host])
    assert cli.ok("hooks", "uninstall", "--host", host).startswith("unchanged:")


def restored(before: dict[str, Any]) -> dict[str, Any]:
    """What uninstall gives back: the file as it was, except that an event whose list was
    empty and is one of waypost's comes back absent (the same to the host: no hooks there;
    from the file alone, install's list cannot be told from one it appended to)."""
    ours = {e for host in INSTALLED.values() for e in host["hooks"]}
    return {**before, "hooks": {event: entries for event, entries in before["hooks"].items()
                                if entries or event not in ours}}


@pytest.mark.parametrize("host", list(FILES))
def test_install_into_no_file_and_back(cli: Cli, tmp_path: Path, host: str) -> None:
    cli.ok("hooks", "install", "--host", host)
    assert settings(tmp_path, host) == INSTALLED[host]
    cli.ok("hooks", "uninstall", "--host", host)
    assert settings(tmp_path, host) == {}


def test_an_older_install_gains_the_new_events_once(cli: Cli, tmp_path: Path) -> None:
    """A settings file with only the Stop hook an earlier waypost installed."""
    write(tmp_path, "claude", json.dumps(
        {"hooks": {"Stop": [group("waypost hook stop --host claude")]}}))
    cli.ok("hooks", "install", "--host", "claude")
    assert settings(tmp_path, "claude") == INSTALLED["claude"]


def test_codex_install_prints_the_feature_flag_and_writes_no_toml(cli: Cli,
                                                                  tmp_path: Path) -> None:
    said = cli.ok("hooks", "install", "--host", "codex")
    assert "[features]\ncodex_hooks = true" in said
    assert ".codex/config.toml" in said
    assert not (tmp_path / ".codex" / "config.toml").exists()
    document = json.loads(cli.ok("hooks", "install", "--host", "codex", "--json"))
    assert document["config_toml"] == "[features]\ncodex_hooks = true\n"


@pytest.mark.parametrize("host", list(FILES))
def test_user_scope_writes_the_home_settings(cli: Cli, tmp_path: Path, host: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    cli.ok("hooks", "install", "--host", host, "--scope", "user")
    assert settings(home, host) == INSTALLED[host]
    assert not (tmp_path / FILES[host]).parent.exists()


@pytest.mark.parametrize("host", list(FILES))
@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"hooks": []}',
                                     '{"hooks": {"Stop": {}, "AfterAgent": {}, "stop": {}}}'])
def test_a_settings_file_it_cannot_read_is_left_alone(cli: Cli, tmp_path: Path, host: str,
                                                      content: str) -> None:
    path = write(tmp_path, host, content)
    outcome = cli("hooks", "install", "--host", host, "--json")
    assert outcome.code == 2
    assert "nothing was changed" in outcome.error()["message"]
    assert path.read_text() == content


def test_a_symlinked_settings_file_stays_a_link(cli: Cli, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles.json"
    real.write_text(json.dumps(EXISTING["claude"]))
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").symlink_to(real)
    cli.ok("hooks", "install", "--host", "claude")
    assert (tmp_path / ".claude" / "settings.json").is_symlink()
    assert json.loads(real.read_text())["hooks"]["Stop"][-1] == group(
        "waypost hook stop --host claude")
