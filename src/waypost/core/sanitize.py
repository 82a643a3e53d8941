"""Private identifiers: finding them (`waypost scan`, the `no-private` check) and redacting
them (`waypost show --public`, the delivered document). Pure rules over text and bytes;
reading files is `waypost.usecases.scanning`'s.

The secret patterns follow the well-known token formats (the same ones detect-secrets and
gitleaks match: AWS key ids, GitHub/GitLab/Slack/Stripe/Google/PyPI/SendGrid tokens, PEM
private keys, JWTs, Bearer tokens, Slack webhook URLs, credentials in URLs, values assigned to
secret-named keys); the rest are emails, private IPv4 addresses, home directory paths, and
the project's own deny list (`[sanitize] deny` in waypost.toml).
A finding never carries the value it found, only where it is and a masked preview.

Every pattern runs in time linear in its input, whatever the input (text is hostile: a worker
writes it, the relay and the reviewer read it). Python's `re` backtracks, so each pattern
keeps to shapes that cannot: an unbounded repetition is either the last thing a match needs,
or starts only where a run of its characters starts (a lookbehind rules out every later
start), or is bounded; where a secret is recognised by its context (`aws … key = VALUE`), the
value is found first and the bounded context before it is checked afterwards.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import msgspec

from waypost.core.sanitize_rules import HOME_AFTER_HIT, RULES, FindingKind, Hit, Subject, may_hit
from waypost.model import Packet, from_json, to_json
from waypost.model.packet import WITHHELD

__all__ = ["WITHHELD", "Finding", "FindingKind", "find", "mask", "public_packet", "redact",
           "scan_bytes", "text_of"]


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    kind: FindingKind
    line: int  # 1-based
    column: int  # 1-based
    preview: str  # masked: never the whole value
    file: str | None = None


# What `redact` writes: never itself a finding, so redacting twice changes nothing.
_MARKER = re.compile(r"\[REDACTED:[a-z_]{1,20}\]")
_RANK = {kind: i for i, kind in enumerate(dict.fromkeys(rule.kind for rule in RULES))}


def _pattern_hits(text: str) -> Iterator[Hit]:
    subject = Subject(text)
    for rule in RULES:
        if not may_hit(rule, subject):
            continue
        for start, end in rule.spans(subject):
            if start < end:
                yield Hit(start, end, rule.kind)


def _term_hits(text: str, terms: Iterable[str], kind: FindingKind) -> Iterator[Hit]:
    for term in terms:
        if term.strip():
            for match in re.finditer(re.escape(term.strip()), text, re.IGNORECASE):
                yield Hit(match.start(), match.end(), kind)


class _Allowed:
    """Spans the sanitizer must not flag; `covers` answers in O(log n) per hit."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self._starts = [start for start, _ in ordered]
        self._reach: list[int] = []  # the furthest end of any span starting at or before
        for _, end in ordered:
            self._reach.append(max(end, self._reach[-1] if self._reach else end))

    def covers(self, hit: Hit) -> bool:
        i = bisect.bisect_right(self._starts, hit.start)
        return i > 0 and self._reach[i - 1] >= hit.end


def _continuations(text: str, hits: Iterable[Hit]) -> Iterator[Hit]:
    """Home paths right after a hit (see `HOME_AFTER_HIT`); each match reads new text."""
    ends = {hit.end for hit in hits}
    for end in ends:
        at = end
        while (match := HOME_AFTER_HIT.match(text, at)) is not None:
            yield Hit(at, match.end(), FindingKind.HOME_PATH)
            at = match.end()


def _hits(text: str, deny: Sequence[str], allow: Sequence[str]) -> list[Hit]:
    """Hits earliest first, overlapping ones merged (the earliest, then longest, names the
    kind); a hit inside an allowed term or a redaction marker is dropped."""
    found = [*_term_hits(text, deny, FindingKind.DENY_LIST), *_pattern_hits(text)]
    if not found:
        return found
    allowed = _Allowed([*((h.start, h.end) for h in _term_hits(text, allow, FindingKind.DENY_LIST)),
                        *(m.span() for m in _MARKER.finditer(text))])
    found = [hit for hit in found if not allowed.covers(hit)]
    found += [hit for hit in _continuations(text, found) if not allowed.covers(hit)]
    found.sort(key=lambda h: (h.start, -(h.end - h.start), _RANK.get(h.kind, -1)))
    kept: list[Hit] = []
    for hit in found:
        if kept and hit.start < kept[-1].end:
            if hit.end > kept[-1].end:  # the rest of a partly covered secret goes too
                kept[-1] = Hit(kept[-1].start, hit.end, kept[-1].kind)
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


# Redacting can change what is around a secret (a key whose name sat inside a token is gone,
# so the assignment after it now reads as one): redact again while something is still found.
# Each pass is linear; real text needs one, contrived nesting a second.
REDACT_PASSES = 4


def redact(text: str, *, deny: Sequence[str] = (), allow: Sequence[str] = ()) -> str:
    """`text` with every private identifier replaced by `[REDACTED:kind]`."""
    for _ in range(REDACT_PASSES):
        hits = _hits(text, deny, allow)
        if not hits:
            break
        out, last = [], 0
        for hit in hits:
            out += [text[last:hit.start], f"[REDACTED:{hit.kind}]"]
            last = hit.end
        text = "".join([*out, text[last:]])
    return text


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



def public_packet(packet: Packet, *, deny: Sequence[str] = (),
                  allow: Sequence[str] = ()) -> Packet:
    """The packet safe to show anyone: the private summary dropped, every string redacted.
    Its times stay times, not redacted: they hold no text (and cost a third of the work)."""
    document = msgspec.to_builtins(packet, builtin_types=(datetime,))
    if document.get("result"):
        document["result"]["summary"] = WITHHELD
    return from_json(to_json(redact_tree(document, deny, allow)), Packet)


def redact_tree(value: Any, deny: Sequence[str], allow: Sequence[str], *,
                keep: frozenset[str] = frozenset()) -> Any:
    """Every string of a JSON-shaped value redacted, but the values of the keys in `keep`
    (an event's `type` tag, which a redacted copy must still decode by)."""
    if isinstance(value, str):
        return redact(value, deny=deny, allow=allow)
    if isinstance(value, list | tuple):
        return [redact_tree(v, deny, allow, keep=keep) for v in value]
    if isinstance(value, dict):
        return {k: v if k in keep else redact_tree(v, deny, allow, keep=keep)
                for k, v in value.items()}
    return value
