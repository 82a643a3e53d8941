"""`waypost hooks install|uninstall --host claude`: waypost's hooks merged into the agent
host's own settings file, and taken out again, every other setting and hook kept.

Claude Code reads `.claude/settings.json` in the project (`--scope project`) and
`~/.claude/settings.json` (`--scope user`). The merge itself is pure
(`waypost.hooks.install_claude`); here the file is read bounded, decided, then replaced
atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import click

from waypost import hooks
from waypost.cli.context import Ctx, verb
from waypost.errors import InvalidInput, NotFound

MAX_SETTINGS = 1 << 20  # bytes: a settings file is a few KiB


def settings_path(scope: str) -> str:
    base = os.path.expanduser("~") if scope == "user" else os.getcwd()
    return os.path.join(base, ".claude", "settings.json")


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


def _change(ctx: Ctx, scope: str, install: bool) -> None:
    path = settings_path(scope)
    before = read_settings(path)
    try:
        after = hooks.install_claude(before) if install else hooks.uninstall_claude(before)
    except ValueError as exc:
        raise InvalidInput(f"{path}: {exc}; nothing was changed") from exc
    changed = after != before
    if changed:
        write_settings(path, after)
    done = ("installed" if install else "removed") if changed else "unchanged"
    ctx.emit({"path": path, "host": "claude", "changed": changed, "result": done},
             f"{done}: waypost's hooks in {path}")


HOST = click.option("--host", type=click.Choice(["claude"]), required=True,
                    help="The agent host whose settings to change.")
SCOPE = click.option("--scope", type=click.Choice(["project", "user"]), default="project",
                     show_default=True, help="project: ./.claude/settings.json; "
                     "user: ~/.claude/settings.json.")


@click.group()
def hooks_group() -> None:
    """Merge waypost's hooks into an agent host's settings, or take them out."""


@hooks_group.command()
@HOST
@SCOPE
@verb
def install(ctx: Ctx, host: str, scope: str) -> None:
    """Add `waypost hook stop --host claude` as the Stop hook (twice changes nothing)."""
    _change(ctx, scope, install=True)


@hooks_group.command()
@HOST
@SCOPE
@verb
def uninstall(ctx: Ctx, host: str, scope: str) -> None:
    """Remove waypost's hooks only; every other hook and setting stays."""
    _change(ctx, scope, install=False)
