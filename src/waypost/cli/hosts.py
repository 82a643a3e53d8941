"""`waypost hooks install|uninstall --host HOST`: waypost's hooks merged into the agent
host's own settings file, and taken out again, every other setting and hook kept.

Each host reads its file in the project (`--scope project`) and in the home folder
(`--scope user`): Claude Code `.claude/settings.json`, Codex `.codex/hooks.json`, Gemini CLI
`.gemini/settings.json`, Cursor `.cursor/hooks.json`. The merge itself is pure
(`waypost.hooks.settings`); here the file is read bounded, decided, then replaced
atomically. Codex runs hooks only with a feature flag in its `config.toml`: the lines to
add are printed, not written (a TOML file is not rewritten by hand).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import click

from waypost.cli.context import Ctx, verb
from waypost.errors import InvalidInput, NotFound
from waypost.hooks import settings as hook_settings

MAX_SETTINGS = 1 << 20  # bytes: a settings file is a few KiB


FILES = {"claude": (".claude", "settings.json"), "codex": (".codex", "hooks.json"),
         "gemini": (".gemini", "settings.json"), "cursor": (".cursor", "hooks.json")}
CODEX_FLAG = "[features]\ncodex_hooks = true"  # Codex runs no hook without it


def settings_path(host: str, scope: str) -> str:
    base = os.path.expanduser("~") if scope == "user" else os.getcwd()
    return os.path.join(base, *FILES[host])


def read_settings(path: str) -> dict[str, Any]:
    """The file's JSON object ({} when there is no file); anything else is refused."""
    from waypost.system.files import read_regular

    try:
        data = read_regular(path, limit=MAX_SETTINGS)
    except NotFound:
        return {}
    try:
        settings = json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not JSON ({exc}); nothing was changed",
                           hint=f"fix or move {path}, then run this again") from exc
    if not isinstance(settings, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; nothing was changed")
    return settings


def write_settings(path: str, settings: dict[str, Any]) -> None:
    """Replace the file whole (a reader never sees half of it); a symbolic link (settings
    kept in a dotfiles repository) stays one: its target is replaced."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".settings.", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _change(ctx: Ctx, host: str, scope: str, install: bool) -> None:
    path = settings_path(host, scope)
    before = read_settings(path)
    try:
        after = (hook_settings.install(host, before) if install
                 else hook_settings.uninstall(before))
    except ValueError as exc:
        raise InvalidInput(f"{path}: {exc}; nothing was changed") from exc
    changed = after != before
    if changed:
        write_settings(path, after)
    done = ("installed" if install else "removed") if changed else "unchanged"
    document: dict[str, Any] = {"path": path, "host": host, "changed": changed, "result": done}
    text = f"{done}: waypost's hooks in {path}"
    if install and host == "codex":
        toml = "~/.codex/config.toml" if scope == "user" else ".codex/config.toml"
        document["config_toml"] = CODEX_FLAG + "\n"
        text += (f"\nCodex runs hooks only with these lines in {toml} (add them if they are "
                 f"not there), and once you trust the hooks when it asks:\n{CODEX_FLAG}")
    ctx.emit(document, text)


HOST = click.option("--host", type=click.Choice(list(FILES)), required=True,
                    help="The agent host whose settings to change.")
SCOPE = click.option("--scope", type=click.Choice(["project", "user"]), default="project",
                     show_default=True, help="project: the host's folder here (e.g. "
                     "./.claude/settings.json); user: the one in your home folder.")


@click.group()
def hooks_group() -> None:
    """Merge waypost's hooks into an agent host's settings, or take them out."""


@hooks_group.command()
@HOST
@SCOPE
@verb
def install(ctx: Ctx, host: str, scope: str) -> None:
    """Add waypost's hooks (stop, subagent stop, session start, prompt) to the host's
    settings; twice changes nothing."""
    _change(ctx, host, scope, install=True)


@hooks_group.command()
@HOST
@SCOPE
@verb
def uninstall(ctx: Ctx, host: str, scope: str) -> None:
    """Remove waypost's hooks only; every other hook and setting stays."""
    _change(ctx, host, scope, install=False)
