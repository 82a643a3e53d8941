"""What a target or notify URI may be: the syntax rules, decided before a run is stored
and again before anything is delivered. Pure: no file is looked at here (the relay
resolves symlinks when it delivers, `delivery.targets`).

Accepted:
    file:PATH                  a file under the delivery root (the folder holding `.waypost/`,
                               `waypost deliver --dir`, or the folder of waypost.toml), or
                               under a place `[delivery] allow_paths` names; `file:///abs` too
    http(s)://HOST[:PORT]/…    a webhook (no credentials in the URL: the secret is the relay's)
    exec:COMMAND               a command of the user's, split like a shell would (no shell)
    slack:CHANNEL_ID           a Slack channel by its ID (C…, G… or D…): the duplicate
                               check and the updates need the ID, a #name can be renamed
    slack-webhook:URL          a Slack incoming webhook (an http(s) URL, as above)
    github:OWNER/REPO#N        one sticky comment on pull request or issue N
    github-status:OWNER/REPO@SHA   a commit status on the full commit SHA (40 or 64 hex)
    mailto:ADDRESS             one email address (no ?subject=, no second address)
    none:                      nothing is sent; shown honestly as "nobody will be told"

Refused: `..` in a file path, `~`, absolute paths outside the root and the allow-list, the
store's own `.waypost/` folder, folders (a trailing `/`), control characters anywhere,
URIs longer than `MAX_URI` characters, and every other scheme. Credentials never belong in
a target: tokens and the SMTP server come from the relay's environment or config.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import NoReturn

import msgspec

from waypost.errors import InvalidInput

MAX_URI = 2048  # characters; a longer target is refused (a URL past this is not a URL)
FORMS = ("file:PATH, http(s)://HOST[:PORT]/…, exec:COMMAND, slack:CHANNEL_ID, "
         "slack-webhook:URL, github:OWNER/REPO#N, github-status:OWNER/REPO@SHA, "
         "mailto:ADDRESS or none:")
SLACK_CHANNEL = re.compile(r"[CGD][A-Z0-9]{6,20}")
_OWNER = r"(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))"
_REPO = r"(?P<repo>[A-Za-z0-9._-]{1,100})"
GITHUB_ISSUE = re.compile(_OWNER + "/" + _REPO + r"#(?P<number>[1-9][0-9]{0,9})")
GITHUB_COMMIT = re.compile(_OWNER + "/" + _REPO + r"@(?P<sha>[0-9a-f]{40}|[0-9a-f]{64})")
MAILBOX = re.compile(r"(?P<local>[A-Za-z0-9.!#$%&'*+/=^_`{|}~-]{1,64})@"
                     r"(?P<domain>[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                     r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)")
STORE_DIR = ".waypost"  # the store's own folder: never a delivery target
# HOST[:PORT] of an http(s) URL: a name or an IPv4 address, or [IPv6]; no nested repeats
_AUTHORITY = re.compile(r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9](?:[A-Za-z0-9._~%-]{0,251}"
                        r"[A-Za-z0-9])?)(?::(?P<port>[0-9]{1,5}))?")


class Places(msgspec.Struct, frozen=True, kw_only=True):
    """Where `file:` targets may write: `root` (relative paths start here) and `allow`
    (absolute folders config names). Absolute, normalised paths."""

    root: str
    allow: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        """Whether absolute `path` is the root's or an allowed folder's (lexically)."""
        return any(inside(path, place) for place in (self.root, *self.allow))


def inside(path: str, folder: str) -> bool:
    """Whether `path` is strictly below `folder` (both absolute and normalised)."""
    return path != folder and posixpath.commonpath([path, folder]) == folder


def check_uri(uri: str, places: Places, *, field: str = "target") -> None:
    """Refuse `uri` (InvalidInput naming `field`: "target" or "notify") unless it is one of
    the accepted forms, well-formed; a `file:` path must stay within `places`."""
    if len(uri) > MAX_URI:
        _refuse(field, uri[:60] + "…", f"it is longer than {MAX_URI} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in uri):
        _refuse(field, uri, "it holds a control character (a newline, a tab, …)")
    if uri.startswith("file:"):
        file_destination(uri, places, field=field)
    elif uri.startswith(("https://", "http://")):
        _check_url(uri, field)
    elif uri.startswith("exec:"):
        _check_command(uri, field)
    elif uri.startswith(("slack:", "slack-webhook:", "github:", "github-status:", "mailto:")):
        _check_service(uri, field)
    elif uri != "none:":
        _unknown(uri, field)


def file_destination(uri: str, places: Places, *, field: str = "target") -> str:
    """The absolute, normalised path a `file:` URI names (relative ones from the root)."""
    rest = uri.removeprefix("file:")
    if rest.startswith("//"):
        if rest[2:] and not rest.startswith("///"):
            _refuse(field, uri, "a file URI names no host: write file:PATH or file:///PATH")
        rest = rest[2:]
    if not rest.strip():
        _refuse(field, uri, "it names no file")
    if rest.startswith("~"):
        _refuse(field, uri, "~ is the home of whoever delivers, not a fixed place; write the "
                "path from the delivery root, or an absolute path [delivery] allow_paths holds")
    if ".." in rest.split("/"):
        _refuse(field, uri, ".. may lead out of the delivery root")
    if rest.endswith("/") or posixpath.basename(posixpath.normpath(rest)) in (".", ""):
        _refuse(field, uri, "it names a folder, not a file")
    path = posixpath.normpath(posixpath.join(places.root, rest))
    if not places.holds(path):
        _refuse(field, uri, f"{path} is outside the delivery root {places.root} and every "
                "place [delivery] allow_paths names")
    if inside(path, posixpath.join(places.root, STORE_DIR)):
        _refuse(field, uri, f"{STORE_DIR}/ is the store's own folder")
    return path


def _check_url(uri: str, field: str) -> None:
    if any(c.isspace() for c in uri):
        _refuse(field, uri, "a URL has no spaces (write %20)")
    authority = re.split(r"[/?#]", uri.partition("://")[2], maxsplit=1)[0]
    if "@" in authority:
        _refuse(field, uri, "credentials do not belong in a target (it is shown and stored); "
                "the relay signs with its webhook secret")
    found = _AUTHORITY.fullmatch(authority)
    if not found:
        _refuse(field, uri, "it names no host, or a bad one: write http(s)://HOST[:PORT]/…")
    port = found.group("port")
    if port is not None and not 0 < int(port) < 65536:
        _refuse(field, uri, f"port {port} is not a port (1 to 65535)")


def _check_command(uri: str, field: str) -> None:
    try:
        words = shlex.split(uri.removeprefix("exec:"))
    except ValueError as exc:
        _refuse(field, uri, f"the command cannot be split into words ({exc})")
    if not words or not words[0]:
        _refuse(field, uri, "it names no command")


def _check_service(uri: str, field: str) -> None:
    scheme, _, rest = uri.partition(":")
    if scheme == "slack-webhook":
        if not rest.startswith(("https://", "http://")):
            _refuse(field, uri, "write slack-webhook:https://hooks.slack.com/services/…")
        _check_url(rest, field)
    elif scheme == "slack" and not SLACK_CHANNEL.fullmatch(rest):
        _refuse(field, uri, "write the channel's ID (C…, G… or D…: in Slack, the channel's "
                "details show it): a #name can change, and the duplicate check needs the ID")
    elif scheme == "github" and not _repo_ok(GITHUB_ISSUE.fullmatch(rest)):
        _refuse(field, uri, "write github:OWNER/REPO#NUMBER (a pull request or an issue)")
    elif scheme == "github-status" and not _repo_ok(GITHUB_COMMIT.fullmatch(rest)):
        _refuse(field, uri, "write github-status:OWNER/REPO@SHA with the full commit SHA "
                "(git rev-parse HEAD)")
    elif scheme == "mailto" and (len(rest) > 254 or not MAILBOX.fullmatch(rest)):
        _refuse(field, uri, "write mailto:NAME@DOMAIN, one address (no ?subject=, no ,)")


def _repo_ok(found: re.Match[str] | None) -> bool:
    return found is not None and found.group("repo") not in (".", "..")


def service_parts(uri: str) -> dict[str, str]:
    """The named parts of an accepted github: or github-status: URI (owner, repo, and
    number or sha); empty for any other."""
    scheme, _, rest = uri.partition(":")
    pattern = {"github": GITHUB_ISSUE, "github-status": GITHUB_COMMIT}.get(scheme)
    found = pattern.fullmatch(rest) if pattern else None
    return found.groupdict() if found else {}


def _unknown(uri: str, field: str) -> NoReturn:
    _refuse(field, uri, "it is not a target waypost can deliver to")


def _refuse(field: str, uri: str, why: str) -> NoReturn:
    raise InvalidInput(f"{field} {uri!r} is refused: {why}",
                       hint=f"a {field} is {FORMS} (e.g. file:result.md)")
