"""Private identifiers: finding them (`waypost scan`, the `no-private` check) and redacting
them (`waypost show --public`, the delivered document). Pure rules over text and bytes;
reading files is `waypost.scanning`'s.

The secret patterns follow the well-known token formats (the same ones detect-secrets and
gitleaks match: AWS key ids, GitHub/GitLab/Slack/Stripe/Google/PyPI tokens, PEM private
keys, JWTs, passwords in assignments); the rest are emails, private IPv4 addresses, home
directory paths, and the project's own deny list (`[sanitize] deny` in waypost.toml).
A finding never carries the value it found, only where it is and a masked preview.
"""

from __future__ import annotations

import bisect
import enum
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import msgspec

from waypost.model import Packet, from_json, to_builtins, to_json


class FindingKind(enum.StrEnum):
    AWS_KEY = "aws_key"  # an AWS access key id or secret access key
    GITHUB_TOKEN = "github_token"  # a GitHub personal, OAuth, app or fine-grained token
    TOKEN = "token"  # another service's API token (GitLab, Slack, Stripe, Google, PyPI, …)
    PRIVATE_KEY = "private_key"  # a PEM (or PuTTY) private key block
    JWT = "jwt"  # a JSON Web Token
    PASSWORD = "password"  # a password or secret in an assignment
    EMAIL = "email"  # an email address
    PRIVATE_IP = "private_ip"  # an RFC 1918 address: 10.x, 172.16-31.x, 192.168.x
    HOME_PATH = "home_path"  # a home directory that names a user
    DENY_LIST = "deny_list"  # a term from the project's deny list


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    kind: FindingKind
    line: int  # 1-based
    column: int  # 1-based
    preview: str  # masked: never the whole value
    file: str | None = None


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_SECRET_NAME = (r"(?:password|passwd|passphrase|pwd|secret|api[_-]?key|access[_-]?key|"
                r"auth[_-]?token|access[_-]?token|token|private[_-]?key|client[_-]?secret)")

# Order matters: where two patterns cover the same text, the earlier (more specific) wins.
PATTERNS: Final[tuple[tuple[FindingKind, re.Pattern[str]], ...]] = (
    (FindingKind.PRIVATE_KEY, re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        r"|PuTTY-User-Key-File-\d:[^\n]*")),
    (FindingKind.JWT, re.compile(
        r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")),
    (FindingKind.AWS_KEY, re.compile(
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"
        r"|(?i:aws.{0,20}?(?:secret|key).{0,20}?[\"'=:\s])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])")),
    (FindingKind.GITHUB_TOKEN, re.compile(
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b")),
    (FindingKind.TOKEN, re.compile(
        r"\b(?:glpat|gldt|glrt|glptt)-[A-Za-z0-9_-]{20,}"
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
        r"|\b[rs]k_live_[0-9A-Za-z]{24,}"
        r"|\bAIza[0-9A-Za-z_-]{35}\b"
        r"|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"
        r"|\bpypi-AgE[A-Za-z0-9_-]{50,}"
        r"|\bnpm_[A-Za-z0-9]{36}\b")),
    (FindingKind.PASSWORD, re.compile(
        r"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_.-])*" + _SECRET_NAME + r"(?![A-Za-z0-9_])"
        r"[\"']?\s*(?::=|=>|=|:)\s*"
        r"(?P<value>\"[^\"\n]{4,}\"|'[^'\n]{4,}'|[^\s\"',;]{8,})")),
    (FindingKind.EMAIL, re.compile(
        r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")),
    (FindingKind.PRIVATE_IP, re.compile(
        rf"(?<![\w.])(?:10\.{_OCTET}|172\.(?:1[6-9]|2\d|3[01])|192\.168)"
        rf"\.{_OCTET}\.{_OCTET}(?!\w|\.\d)")),
    (FindingKind.HOME_PATH, re.compile(
        r"(?<![\w/])(?:/home|/Users)/(?!Shared\b)[A-Za-z0-9._-]+"
        r"|\b[A-Za-z]:[\\/]+Users[\\/]+(?!Public\b)[A-Za-z0-9._-]+?(?=[\\/\s\"']|$)",
        re.MULTILINE)),
)

# Values of a `password = …` assignment that are references or placeholders, not secrets.
_NOT_SECRETS: Final = frozenset({"none", "null", "nil", "true", "false", "undefined", "required",
                                 "optional", "string", "changeme", "redacted", "secret",
                                 "password", "example"})


def _is_secret_value(value: str) -> bool:
    quoted = value[0] in "\"'"
    bare = value.strip("\"'")
    if bare[0] in "$%{<[(*" or bare.lower() in _NOT_SECRETS or set(bare) <= set("xX*.-_"):
        return False
    if quoted:
        return True
    if re.search(r"[()\[\]]", bare) or re.fullmatch(r"[A-Za-z_]\w*(?:\.\w+)+", bare):
        return False  # code: a call, an index or an attribute
    return bool(re.search(r"\d", bare) or (re.search("[a-z]", bare) and re.search("[A-Z]", bare)))


class _Hit(msgspec.Struct, frozen=True):
    start: int
    end: int
    kind: FindingKind


def _pattern_hits(text: str) -> Iterator[_Hit]:
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            if kind is FindingKind.PASSWORD:
                value = match.group("value")
                if not _is_secret_value(value):
                    continue
                start, end = match.span("value")
                if value[0] in "\"'":
                    start, end = start + 1, end - 1
                yield _Hit(start, end, kind)
            else:
                yield _Hit(match.start(), match.end(), kind)


def _term_hits(text: str, terms: Iterable[str], kind: FindingKind) -> Iterator[_Hit]:
    for term in terms:
        if term.strip():
            for match in re.finditer(re.escape(term.strip()), text, re.IGNORECASE):
                yield _Hit(match.start(), match.end(), kind)


def _hits(text: str, deny: Sequence[str], allow: Sequence[str]) -> list[_Hit]:
    """Non-overlapping hits, earliest first; a hit inside an allowed term is dropped."""
    allowed = list(_term_hits(text, allow, FindingKind.DENY_LIST))
    found = [*_term_hits(text, deny, FindingKind.DENY_LIST), *_pattern_hits(text)]
    rank = {kind: i for i, (kind, _) in enumerate(PATTERNS)}
    found.sort(key=lambda h: (h.start, -(h.end - h.start), rank.get(h.kind, -1)))
    kept: list[_Hit] = []
    for hit in found:
        if kept and hit.start < kept[-1].end:
            continue
        if any(a.start <= hit.start and hit.end <= a.end for a in allowed):
            continue
        kept.append(hit)
    return kept


def mask(value: str, kind: FindingKind) -> str:
    """A preview that says what was found without repeating it."""
    if kind is FindingKind.PRIVATE_KEY:
        return value.splitlines()[0][:40] if value else "…"
    if kind in {FindingKind.PASSWORD, FindingKind.DENY_LIST} or len(value) < 12:
        return f"…({len(value)} chars)"
    return f"{value[:4]}…({len(value)} chars)"


def find(text: str, *, deny: Sequence[str] = (), allow: Sequence[str] = (),
         file: str | None = None) -> list[Finding]:
    """Every private identifier in `text`, with 1-based line and column."""
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    findings = []
    for hit in _hits(text, deny, allow):
        line = bisect.bisect_right(starts, hit.start)
        findings.append(Finding(kind=hit.kind, line=line, column=hit.start - starts[line - 1] + 1,
                                preview=mask(text[hit.start:hit.end], hit.kind), file=file))
    return findings


def redact(text: str, *, deny: Sequence[str] = (), allow: Sequence[str] = ()) -> str:
    """`text` with every private identifier replaced by `[REDACTED:kind]`."""
    out, last = [], 0
    for hit in _hits(text, deny, allow):
        out += [text[last:hit.start], f"[REDACTED:{hit.kind}]"]
        last = hit.end
    return "".join([*out, text[last:]])


# --- bytes ------------------------------------------------------------------------------

def text_of(data: bytes) -> str | None:
    """The text of `data`, or None for binary content (a NUL in the first 8 KiB)."""
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def scan_bytes(data: bytes, name: str, *, deny: Sequence[str] = (),
               allow: Sequence[str] = ()) -> list[Finding]:
    text = text_of(data)
    return [] if text is None else find(text, deny=deny, allow=allow, file=name)


# --- the public packet ------------------------------------------------------------------

WITHHELD = "[withheld: the private summary is not part of the public packet]"


def public_packet(packet: Packet, *, deny: Sequence[str] = (),
                  allow: Sequence[str] = ()) -> Packet:
    """The packet safe to show anyone: the private summary dropped, every string redacted."""
    document = to_builtins(packet)
    if document.get("result"):
        document["result"]["summary"] = WITHHELD
    return from_json(to_json(_redact_tree(document, deny, allow)), Packet)


def _redact_tree(value: Any, deny: Sequence[str], allow: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact(value, deny=deny, allow=allow)
    if isinstance(value, list | tuple):
        return [_redact_tree(v, deny, allow) for v in value]
    if isinstance(value, dict):
        return {k: _redact_tree(v, deny, allow) for k, v in value.items()}
    return value
