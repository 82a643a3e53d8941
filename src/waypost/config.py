"""Project configuration from `waypost.toml` (found by walking up, like the store)."""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any

import msgspec

from waypost.durations import parse_duration
from waypost.errors import InvalidInput, NotFound

CONFIG_FILE = "waypost.toml"


class Config(msgspec.Struct, frozen=True, kw_only=True):
    long_running_after: float = 600.0  # --expect above this classifies a run long_running
    max_artifact_bytes: int = 64 * 1024 * 1024  # larger files are refused by `artifact add`
    output_tail_bytes: int = 4096  # how much command output the packet keeps inline
    evidence_timeout: float = 3600.0  # `evidence run` kills the command after this
    max_output_bytes: int = 4 * 1024 * 1024  # a command's output kept (its end); the rest counted
    min_artifact_bytes: int = 16  # a smaller artifact is not substantive (`artifact:`, `ready`)
    min_artifact_words: int = 3  # a text artifact with fewer words is not substantive
    gates: tuple[tuple[str, str], ...] = ()  # [gates] NAME = "CHECK": every run's default gates
    deny: tuple[str, ...] = ()  # [sanitize] deny: project terms that are private
    allow: tuple[str, ...] = ()  # [sanitize] allow: terms the sanitizer must not flag
    require_run: bool = False  # [hooks] require_run: a stop hook refuses a session with no run
    group_commit: bool = True  # [store] group_commit: `waypost serve`'s SQLite store commits
    # the writes of requests that wait together (one fsync); false: one transaction each
    # [answers.slack] / [answers.github]: a service's user id (a Slack user id, a GitHub
    # login) and the waypost actor it answers as; never a display name
    slack_users: tuple[tuple[str, str], ...] = ()
    github_users: tuple[tuple[str, str], ...] = ()
    github_review_approves: bool = False  # [answers]: a PR review "approved" approves
    path: str | None = None  # where the config was read from


def find_upward(name: str, start: str | os.PathLike[str] | None = None) -> str | None:
    """The file `name` (a relative path) in `start` (default: here) or the nearest parent
    that has one. (os.path, not pathlib: pathlib costs every hot CLI call ~3 ms.)"""
    folder = os.path.realpath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, name)
        if _is_file(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _is_file(path: str) -> bool:
    """`Path.is_file`: False where nothing is there, but a folder that cannot be read is an
    error, not a reason to walk on to an outer store (os.path.isfile would hide it)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise unreadable(path) from exc
        raise InvalidInput(f"cannot look at {path}: {exc.strerror or exc}") from exc


def unreadable(path: str) -> NotFound:
    """A file (a store, its folder, a config) this user may not read: there is one, but not
    for this user (exit 4, as for none), named with what to check."""
    return NotFound(f"permission denied: this user may not read {path} (or a folder on "
                    "its way)", hint="check the file's and its folders' owner and mode, run "
                    "as the user who owns the store, or point --store / WAYPOST_URL "
                    "elsewhere")


def find_config(start: str | os.PathLike[str] | None = None) -> str | None:
    return find_upward(CONFIG_FILE, start)


def read_toml(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, encoding="utf-8") as fh:
            return tomllib.loads(fh.read())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from exc


def load_config(start: str | os.PathLike[str] | None = None) -> Config:
    path = find_config(start)
    return Config() if path is None else _from_table(read_toml(path), path)


def _from_table(raw: dict[str, Any], where: str) -> Config:
    for table in ("runs", "limits", "gates", "sanitize", "hooks", "store", "answers"):
        if not isinstance(raw.get(table, {}), dict):
            raise InvalidInput(f"{where}: {table} must be a table ([{table}]), not a value",
                               hint=f"write [{table}] on a line of its own, its keys below")
    runs = raw.get("runs", {})
    limits = raw.get("limits", {})
    known = {"runs": {"long_running_after"},
             "limits": {"max_artifact_bytes", "output_tail_bytes", "evidence_timeout",
                        "min_artifact_bytes", "min_artifact_words", "max_output_bytes"},
             "sanitize": {"deny", "allow"}, "hooks": {"require_run"},
             "store": {"group_commit"},
             "answers": {"slack", "github", "github_review_approves"}}
    for table, keys in known.items():
        unknown = set(raw.get(table, {})) - keys
        if unknown:
            names = ", ".join(sorted(unknown))
            raise InvalidInput(f"{where}: unknown key(s) in [{table}]: {names}")
    values: dict[str, Any] = {"path": where}
    if "long_running_after" in runs:
        values["long_running_after"] = parse_duration(
            str(runs["long_running_after"]), f"{where}: [runs] long_running_after")
    if "evidence_timeout" in limits:
        values["evidence_timeout"] = parse_duration(
            str(limits["evidence_timeout"]), f"{where}: [limits] evidence_timeout", positive=True)
    for key in ("max_artifact_bytes", "output_tail_bytes", "min_artifact_bytes",
                "min_artifact_words", "max_output_bytes"):
        if key in limits:
            if type(limits[key]) is not int or not 0 <= limits[key] <= 2**40:
                raise InvalidInput(f"{where}: [limits] {key} must be a whole number")
            values[key] = limits[key]
    values.update(_gates_and_terms(raw, where))
    require = raw.get("hooks", {}).get("require_run", False)
    if type(require) is not bool:
        raise InvalidInput(f"{where}: [hooks] require_run must be true or false")
    values["require_run"] = require
    group = raw.get("store", {}).get("group_commit", True)
    if type(group) is not bool:
        raise InvalidInput(f"{where}: [store] group_commit must be true or false")
    values["group_commit"] = group
    values.update(_answers(raw.get("answers", {}), where))
    return Config(**values)


_SERVICE_IDS = {"slack": re.compile(r"[UW][A-Z0-9]{2,30}"),
                "github": re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")}


def _answers(table: dict[str, Any], where: str) -> dict[str, Any]:
    """`[answers]`: who each Slack user id and GitHub login answers as."""
    values: dict[str, Any] = {}
    for service, shape in _SERVICE_IDS.items():
        mapping = table.get(service, {})
        if not isinstance(mapping, dict) or not all(
                isinstance(v, str) and v.strip() and len(v) <= 200 for v in mapping.values()):
            raise InvalidInput(f"{where}: [answers.{service}] maps a {service} user to a "
                               "waypost actor", hint=f'e.g. [answers.{service}] '
                               f'{"U024BE7LH" if service == "slack" else "octocat"} = "alice"')
        for user in mapping:
            if not shape.fullmatch(user):
                raise InvalidInput(f"{where}: [answers.{service}] {user[:80]!r} is not a "
                                   f"{service} user id", hint="Slack: a user id such as "
                                   "U024BE7LH, never a display name; GitHub: a login")
        if service == "github" and len({u.casefold() for u in mapping}) < len(mapping):
            raise InvalidInput(f"{where}: [answers.github] names one login twice (GitHub's "
                               "logins are case-insensitive)")
        values[f"{service}_users"] = tuple(mapping.items())
    approves = table.get("github_review_approves", False)
    if type(approves) is not bool:
        raise InvalidInput(f"{where}: [answers] github_review_approves must be true or false")
    values["github_review_approves"] = approves
    return values


def _gates_and_terms(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """`[gates]` (NAME = "CHECK") and `[sanitize]` deny/allow lists of terms."""
    gates = raw.get("gates", {})
    if not isinstance(gates, dict) or not all(isinstance(v, str) for v in gates.values()):
        raise InvalidInput(f"{where}: [gates] maps a gate name to a check",
                           hint='e.g. [gates] tests = "command:pytest -q"')
    values: dict[str, Any] = {"gates": tuple(gates.items())}
    for key in ("deny", "allow"):
        terms = raw.get("sanitize", {}).get(key, [])
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
            raise InvalidInput(f"{where}: [sanitize] {key} must be a list of strings")
        values[key] = tuple(terms)
    return values
