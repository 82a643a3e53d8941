"""The sanitizer's rules: one pattern per shape of private identifier, and for the shapes
recognised by their context (a secret-named key, a URL's userinfo, `Bearer`), the decision
whether the value found is a secret or a placeholder, a reference or code.

Every pattern here must stay linear on any input (see `waypost.core.sanitize`): an unbounded
repetition either ends the match, or starts only at the start of a run of its characters, or
is bounded. Each pattern also starts with a literal (the context before it is checked by a
lookbehind placed after the literal, or by the rule's code), so that `re` skips ordinary
text at the speed of a substring search. `tests/unit/test_sanitize_linear.py` measures
every rule on adversarial input.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Final, NamedTuple


class FindingKind(enum.StrEnum):
    AWS_KEY = "aws_key"  # an AWS access key id or secret access key
    GITHUB_TOKEN = "github_token"  # a GitHub personal, OAuth, app or fine-grained token
    TOKEN = "token"  # another service's API token, a Bearer token or a webhook URL's secret
    PRIVATE_KEY = "private_key"  # a PEM (or PuTTY) private key block
    JWT = "jwt"  # a JSON Web Token
    PASSWORD = "password"  # a secret assigned to a secret-named key, or in a URL's userinfo
    EMAIL = "email"  # an email address
    PRIVATE_IP = "private_ip"  # an RFC 1918 address: 10.x, 172.16-31.x, 192.168.x
    HOME_PATH = "home_path"  # a home directory that names a user
    DENY_LIST = "deny_list"  # a term from the project's deny list


class Hit(NamedTuple):
    start: int
    end: int
    kind: FindingKind


Span = tuple[int, int]


class Subject:
    """The text under scan, and (made once, when a rule needs it) the same text reversed: a
    pattern that must look back an unbounded way runs forwards over the reversed text."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def reversed(self) -> str:
        return self.text[::-1]


class Rule(NamedTuple):
    kind: FindingKind
    spans: Callable[[Subject], Iterator[Span]]
    # where this finds nothing, the rule finds nothing: the rule's pattern itself, or the one
    # its code searches for first (over the reversed text when `backwards`)
    first: re.Pattern[str]
    backwards: bool = False


MatchSpan = Callable[[re.Match[str]], "Span | None"]  # None: the match is not a secret


def _whole(match: re.Match[str]) -> Span:
    return match.span()


def _value(match: re.Match[str]) -> Span:
    return match.span("value")


def _word_char(text: str, at: int) -> bool:
    return at >= 0 and (text[at].isalnum() or text[at] == "_")


def matches(kind: FindingKind, pattern: re.Pattern[str], span: MatchSpan = _whole) -> Rule:
    """The rule that finds `pattern`'s matches, each as `span` says (None: not a secret)."""
    def spans(subject: Subject) -> Iterator[Span]:
        for match in pattern.finditer(subject.text):
            found = span(match)
            if found is not None:
                yield found
    return Rule(kind, spans, pattern)


# --- is a value a secret? -----------------------------------------------------------------

# Values that stand for a secret without being one: placeholders, types, switches.
_NOT_SECRETS: Final = frozenset({
    "none", "null", "nil", "true", "false", "undefined", "required", "optional", "string",
    "changeme", "change_me", "redacted", "secret", "password", "passwd", "pass", "pwd", "pw",
    "example", "token", "str", "bytes", "int", "bool", "any", "secretstr", "basic", "bearer",
    "digest", "oauth", "oauth2", "enabled", "disabled", "on", "off", "yes", "no", "empty",
    "unset", "hidden", "masked", "omitted", "placeholder", "dummy", "todo", "tbd", "n/a"})
# In a URL's userinfo only the obvious stand-ins: `u:secret@db` is a real (weak) password.
_URL_STAND_INS: Final = frozenset({"password", "passwd", "pass", "pwd", "pw", "changeme",
                                   "change_me", "redacted", "example", "placeholder"})
_PLACEHOLDER: Final = re.compile(
    r"[xX*._#-]+"  # xxx, ***, ...
    r"|[A-Z]+(?:_[A-Z]+)+"  # an environment variable's name: DB_PASSWORD
    r"|(?i:your|example|sample)[_-]?[A-Za-z_-]*")
_CODE: Final = re.compile(r"[()\[\]{}]|^[A-Za-z_]\w*(?:\.\w+)+$")  # a call, index or attribute
_WORD: Final = re.compile(r"[A-Za-z][a-z]*(?:-[a-z]+)*")  # an ordinary word
_TYPE_NAME: Final = re.compile(r"(?:[A-Z][a-z]+)+")  # `token: Token` is an annotation
_TRAILING: Final = ".!?:`"  # sentence punctuation after a bare value is not part of it


def _placeholder(value: str, key: str = "", words: frozenset[str] = _NOT_SECRETS) -> bool:
    """A reference (`$VAR`, `${VAR}`, `%(var)s`, `{{ var }}`, `<…>`) or a placeholder."""
    lowered = value.lower()
    return (value[0] in "$%{<[(*" or lowered in words or lowered == key.lower()
            or lowered == key.lower().rsplit("_", 1)[-1] or not any(c.isalnum() for c in value)
            or _PLACEHOLDER.fullmatch(value) is not None)


def _random_looking(value: str) -> bool:
    """Not an ordinary word: a digit, an inner capital or a symbol in it."""
    return _WORD.fullmatch(value) is None


def _trim_bare(value: str) -> str:
    """A bare value without the punctuation of the sentence around it: trailing `.!?:` and
    closing brackets that close nothing in the value (a secret in parentheses)."""
    opened_at = {closer: value.find(opener) for opener, closer in ("()", "[]", "{}")}
    end = len(value)
    while end:
        last = value[end - 1]
        if last not in _TRAILING and not (last in opened_at and opened_at[last] < 0):
            break
        end -= 1
    return value[:end]


# --- secrets assigned to secret-named keys ------------------------------------------------

# The names, as templates (`?` stands for an optional `_` or `-`); any prefix may come
# before a name (`db_password`, `dbPassword`), and the name ends the key.
_SECRET_NAMES: Final = (
    "password", "passwd", "passphrase", "pwd", "secret", "credential", "credentials", "auth",
    "token", *(f"{what}?key" for what in ("api", "access", "secret", "private", "account",
                                         "shared?access", "signing", "encryption", "master",
                                         "auth")))
# Found backwards: the separator (rare) first, then the name before it, over the reversed
# text; the forward rules of the separator (`=` not `==`, `:` not `::` or `://`) are checked
# after.
_SEPARATOR_AND_NAME_REVERSED: Final = re.compile(
    r"(?P<sep>=:|>=|=|:)[ \t]*[\"']?(?i:(?P<name>"
    + "|".join(name[::-1].replace("?", "[_-]?") for name in _SECRET_NAMES) + "))")
_NOT_AFTER_SEPARATOR: Final = {"=": "=", ":": ":/="}
# A secret-named key and its separator inside a value (read once per value: linear).
_NESTED_KEY: Final = re.compile(
    r"(?i:" + "|".join(name.replace("?", "[_-]?") for name in _SECRET_NAMES) + r")[\"']?[ \t]*[=:]")
_VALUE: Final = re.compile(r"[ \t]*(?P<value>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s\"'`,;&]+)")
_KEY_CHARS: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
_VALUE_ENDS_ITEM: Final = re.compile(r"[\"']?[ \t]*(?:[,}]|\r?\n|\Z)")
_LOOK_BACK: Final = 80  # how far before a key its line start is looked for


class _Assignment(NamedTuple):
    key: str  # the whole key: the secret name and any prefix (`db_password`)
    name_start: int
    separator: str
    value: re.Match[str]


def _assignments(subject: Subject) -> Iterator[_Assignment]:
    """Every `NAME = value`, `NAME: value`, … in the text, first to last; the values found
    never overlap (a value is read once), so the whole scan stays linear."""
    text, size = subject.text, len(subject.text)
    found = list(_SEPARATOR_AND_NAME_REVERSED.finditer(subject.reversed))
    read_to = 0
    for match in reversed(found):
        name_start, separator_end = size - match.end(), size - match.start()
        separator = match.group("sep")[::-1]
        after = text[separator_end:separator_end + 1]
        if name_start < read_to or (after and after in _NOT_AFTER_SEPARATOR.get(separator, "")):
            continue
        value = _VALUE.match(text, separator_end)
        if value is not None and _awaits_value(value.group("value")):
            continue  # `password= PASSWORD: x`: the value is a key of its own, read as one
        if value is not None:
            read_to = value.end()
            prefix = text[max(0, name_start - _LOOK_BACK):name_start]
            key = prefix[len(prefix.rstrip(_KEY_CHARS)):] + match.group("name")[::-1]
            yield _Assignment(key, name_start, separator, value)


def _awaits_value(value: str) -> bool:
    """Whether an unquoted value is itself a secret-named key and its separator: its own
    value follows, and is judged as that key's (never hidden behind the first)."""
    return value[-1] in ":=" and _NESTED_KEY.search(value) is not None


def _key_position(text: str, name_start: int) -> bool:
    """Whether the key ending in the name at `name_start` begins its line (after indentation
    or a list mark) or an item of a `{…, …}` mapping."""
    floor = max(0, name_start - _LOOK_BACK)
    newline = text.rfind("\n", floor, name_start)
    if newline < 0 and floor > 0:
        return False  # a line this long before the key is prose or data, not `key: value`
    head = text[newline + 1:name_start].rstrip(_KEY_CHARS).rstrip("\"'").rstrip(" \t")
    return head.lstrip(" \t-*>#") == "" or head.endswith(("{", ","))


def _assigned_secret(text: str, assignment: _Assignment) -> Span | None:
    value, (start, end) = assignment.value.group("value"), assignment.value.span("value")
    quoted = value[0] in "\"'`"
    if quoted:
        value, start, end = value[1:-1], start + 1, end - 1
    else:
        value = _trim_bare(value)
        end = start + len(value)
    if not value or (_placeholder(value, assignment.key) and not _NESTED_KEY.search(value)):
        return None  # (a "placeholder" that holds a key of its own is no placeholder)
    if quoted:
        return start, end
    if _CODE.search(value):
        return None
    if assignment.separator != ":" or (_random_looking(value) and not _TYPE_NAME.fullmatch(value)):
        return start, end
    # `key: word` is a secret only as a whole `key: value` line, not inside a sentence.
    if (_key_position(text, assignment.name_start)
            and _VALUE_ENDS_ITEM.match(text, assignment.value.end())):
        return start, end
    return None


def _assigned_secrets(subject: Subject) -> Iterator[Span]:
    for assignment in _assignments(subject):
        span = _assigned_secret(subject.text, assignment)
        if span is not None:
            yield span


# --- secrets in URLs and headers ------------------------------------------------------------

def _userinfo(match: re.Match[str]) -> Span | None:
    """`scheme://USER:PASSWORD@host`: the user and the password go (the host stays)."""
    password = match.group("password")
    if _placeholder(password, words=_URL_STAND_INS):
        return None
    return match.start("user"), match.end("password")


def _scheme_token(match: re.Match[str]) -> Span | None:
    value = match.group("value")
    if len(value) < 8 or _placeholder(value) or not _random_looking(value.rstrip("=")):
        return None
    return match.span("value")


# The 40 characters of an AWS secret access key, then the context that names it before them.
_AWS_SECRET: Final = re.compile(r"[\"'=:\s](?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")
_AWS_CONTEXT: Final = re.compile(r"(?i)aws.{0,20}?(?:secret|key).{0,20}?[\"'=:\s]\Z")
_AWS_CONTEXT_WIDTH: Final = 3 + 20 + 6 + 20 + 1


def _aws_secret(match: re.Match[str]) -> Span | None:
    start = match.start("value")
    context = _AWS_CONTEXT.search(match.string, max(0, start - _AWS_CONTEXT_WIDTH), start)
    return match.span("value") if context else None


# --- emails, addresses, paths ---------------------------------------------------------------

_EMAIL_DOMAIN: Final = re.compile(r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_EMAIL_LOCAL_REVERSED: Final = re.compile(r"[A-Za-z0-9_.%+-]+")


def _emails(subject: Subject) -> Iterator[Span]:
    """`local@domain`: the domain found forwards from the `@`, the local part backwards
    (over the reversed text, one anchored match: the local parts of two `@`s never share a
    character)."""
    text, size = subject.text, len(subject.text)
    for match in _EMAIL_DOMAIN.finditer(text):
        at = match.start()
        local = _EMAIL_LOCAL_REVERSED.match(subject.reversed, size - at)
        if local is not None:
            start = at - (local.end() - local.start())
            if not _word_char(text, start - 1):
                yield start, match.end()


def _after(forbidden: str) -> MatchSpan:
    def span(match: re.Match[str]) -> Span | None:
        start = match.start()
        before = match.string[start - 1] if start else " "
        return None if before in forbidden or before.isalnum() else match.span()
    return span


def _windows_home(match: re.Match[str]) -> Span | None:
    """A Windows user folder (drive, `Users`, name), found from the drive's `:`; the drive
    letter must start a word."""
    start = match.start() - 1
    return None if _word_char(match.string, start - 1) else (start, match.end())


_UNIX_HOME: Final = r"(?:home|Users)/(?!Shared\b)[A-Za-z0-9._-]+"
# `…/home/NAME` inside a longer path is no home path; but once what comes before it is
# redacted, it reads as one: a home path right after a hit is part of that hit.
HOME_AFTER_HIT: Final = re.compile(r"/" + _UNIX_HOME)
_OCTET: Final = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_PEM_LABEL: Final = r"(?:[A-Z0-9]{1,32} ){0,8}PRIVATE KEY(?: BLOCK)?-----"

# Order matters: where two hits start together and are as long, the earlier rule names it.
RULES: Final[tuple[Rule, ...]] = (
    matches(FindingKind.PRIVATE_KEY, re.compile(
        r"-----BEGIN " + _PEM_LABEL + r"[\s\S]*?(?:-----END " + _PEM_LABEL + r"|\Z)"
        r"|PuTTY-User-Key-File-\d:[^\n]*")),
    matches(FindingKind.JWT, re.compile(
        r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")),
    matches(FindingKind.AWS_KEY, re.compile(
        r"A(?<!\wA)(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}\b")),
    matches(FindingKind.AWS_KEY, _AWS_SECRET, _aws_secret),
    matches(FindingKind.GITHUB_TOKEN, re.compile(
        r"gh[pousr]_(?<!\wgh[pousr]_)[A-Za-z0-9]{36,255}\b"
        r"|github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{22,255}\b")),
    matches(FindingKind.TOKEN, re.compile(  # each starts a word: `(?<!\w…)`
        r"gl(?<!\wgl)(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}"
        r"|xox(?<!\wxox)[abposr]-[A-Za-z0-9-]{10,}"
        r"|[rs]k_live_(?<!\w[rs]k_live_)[0-9A-Za-z]{24,}"
        r"|AIza(?<!\wAIza)[0-9A-Za-z_-]{35}\b"
        r"|sk-(?<!\wsk-)(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"
        r"|pypi-AgE(?<!\wpypi-AgE)[A-Za-z0-9_-]{50,}"
        r"|npm_(?<!\wnpm_)[A-Za-z0-9]{36}\b"
        r"|SG\.(?<!\wSG\.)[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}")),
    matches(FindingKind.TOKEN, re.compile(  # a Slack webhook URL: its path is the secret
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<value>[A-Za-z0-9_/+-]{8,})"),
        _value),
    matches(FindingKind.TOKEN, re.compile(
        r"[Bb](?<![A-Za-z0-9_][Bb])(?:earer|asic|EARER|ASIC)[ \t]+"
        r"(?P<value>[A-Za-z0-9._~+/-]+=*)"), _scheme_token),
    matches(FindingKind.PASSWORD, re.compile(
        r"://(?<=[A-Za-z0-9]://)(?P<user>[^\s/?#@:]{0,128}):(?P<password>[^\s/?#@]{1,256})@"),
        _userinfo),
    Rule(FindingKind.PASSWORD, _assigned_secrets, _SEPARATOR_AND_NAME_REVERSED, backwards=True),
    Rule(FindingKind.EMAIL, _emails, _EMAIL_DOMAIN),
    matches(FindingKind.PRIVATE_IP, re.compile(
        rf"(?:10\.{_OCTET}|172\.(?:1[6-9]|2\d|3[01])|192\.168)"
        rf"\.{_OCTET}\.{_OCTET}(?!\w|\.\d)"), _after("._")),
    matches(FindingKind.HOME_PATH, re.compile(r"/(?<![\w/]/)" + _UNIX_HOME)),
    matches(FindingKind.HOME_PATH, re.compile(
        r":(?<=[A-Za-z]:)[\\/]{1,4}Users[\\/]{1,4}(?!Public\b)[A-Za-z0-9._-]+"), _windows_home),
)


def may_hit(rule: Rule, subject: Subject) -> bool:
    """False only where the rule finds nothing: one search in C, before the rule's own
    Python (most of a packet's strings are short and hold nothing: redacting one took
    about three times as long when every rule's Python ran on it)."""
    return rule.first.search(subject.reversed if rule.backwards else subject.text) is not None
