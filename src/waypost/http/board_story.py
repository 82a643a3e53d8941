"""The run page's words for people: each event as a sentence (who did what, with its note
or blocker inline), evidence assurance as a badge's words, and Markdown rendered to a safe
subset of HTML. Pure, no I/O.

The Markdown here is a deliberately small dialect: every character is escaped first, then
headings, lists, code blocks, inline code, emphasis and links are recognised in the escaped
text. Raw HTML therefore shows as text, a link is made only for an http(s) URL (with
rel="noopener noreferrer"), and no image is ever fetched from elsewhere.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup

from waypost.core.reviewed import short
from waypost.core.sanitize import WITHHELD
from waypost.display import one_line, printable
from waypost.events import (
    Approved,
    ArtifactRecorded,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    ChangesRequested,
    Claimed,
    Delivered,
    DeliveryFailed,
    Event,
    EvidenceRecorded,
    GateAdded,
    GateAdopted,
    Heartbeat,
    MarkedReady,
    Nudged,
    Retargeted,
    Reviewed,
    Started,
)
from waypost.usecases.previews import Preview
from waypost.usecases.views import gates_by_verdict, retarget_gist

NOTE: Final = 300  # characters of a note, reason or detail in a sentence
ASSURED: Final = {"recorded": "ran here", "reported": "reported",
                  "rechecked": "re-checked by the owner"}
MARKDOWN_LINES: Final = 2000


def badge(assurance: str) -> str:
    """An evidence item's assurance as a person reads it."""
    return ASSURED.get(assurance, assurance)


def _q(text: str | None) -> str:
    shown = one_line(text or "", limit=None)
    return shown if len(shown) <= NOTE else shown[: NOTE - 1] + "…"


def sentence(event: Event) -> tuple[str, str]:
    """What happened, as a sentence, and its tone (note, blocker, answer or plain)."""
    who, d = one_line(event.actor), event.data
    if isinstance(d, Started):
        return f"{who} started “{_q(d.title)}” for {_q(d.owner)}, delivering to " \
               f"{_q(d.target)}", "plain"
    if isinstance(d, Claimed):
        took = f", taking over from {_q(d.took_over_from)}" if d.took_over_from else ""
        return f"{who} took the run on (epoch {d.epoch}){took}", "plain"
    if isinstance(d, Heartbeat):
        done = f" at {d.fraction:.0%}" if d.fraction is not None else ""
        return f"{who} checked in{done}" + (f": {_q(d.note)}" if d.note else ""), \
            "note" if d.note else "plain"
    if isinstance(d, BlockerOpened):
        return f"{who} is blocked ({d.kind}, {d.blocker_id}): {_q(d.detail)}", "blocker"
    if isinstance(d, BlockerResolved):
        return f"{who} resolved {d.blocker_id}: {_q(d.resolution)}", "answer"
    if isinstance(d, ArtifactRecorded):
        return f"{who} recorded the artifact {_q(d.artifact.name)} ({d.artifact.role})", \
            "plain"
    if isinstance(d, EvidenceRecorded):
        e = d.evidence
        return f"{who} recorded evidence {e.id}: {e.verdict}, {badge(str(e.assurance))}: " \
               f"{_q(e.summary)}", "plain"
    if isinstance(d, MarkedReady):  # the summary, unless withheld from this reader
        said = (d.public_summary or "") if d.summary == WITHHELD else d.summary
        return f"{who} marked it ready for review: {_q(said)}", "note"
    if isinstance(d, ChangesRequested):
        return f"{who} asked for changes: {_q(d.reason)}", "answer"
    if isinstance(d, AuthorityTransferred):
        return f"{who} handed the {d.authority} authority to {_q(d.to)}", "answer"
    if isinstance(d, Approved):
        bound = f" {short(d.reviewed)}" if d.reviewed else ""
        waived = "; ".join(f"{_q(w.gate)} ({_q(w.reason)})" for w in d.waivers)
        return f"{who} approved the result{bound}" + (f", waiving {waived}" if waived
                                                       else ""), "answer"
    if isinstance(d, Cancelled):
        return f"{who} cancelled the run: {_q(d.reason)}", "answer"
    if isinstance(d, Reviewed):
        return f"{who} re-ran the gates ({d.review_id}): {gates_by_verdict(d.evidence)}", \
            "answer"
    if isinstance(d, Delivered):
        said = f", receipt {d.assurance}" if d.assurance else ""
        return f"{who} delivered it ({d.attempts} attempt(s){said}): {_q(d.detail)}", "plain"
    if isinstance(d, DeliveryFailed):
        return f"delivery failed after {d.attempts} attempt(s) ({d.blocker_id}): " \
               f"{_q(d.detail)}", "blocker"
    if isinstance(d, Retargeted):
        return f"{who} changed where it goes: {_q(retarget_gist(d))}", "plain"
    if isinstance(d, GateAdded):
        optional = " (optional)" if not d.required else ""
        return f"{who} declared the gate {_q(d.name)}{optional}: {_q(d.check)}", "plain"
    if isinstance(d, GateAdopted):
        return f"{who} adopted the gate {_q(d.name)}", "answer"
    if isinstance(d, Nudged):
        return f"{who} was nudged about {d.topic}: {_q(d.detail)}", "note"
    return f"{who}: {event.type}", "plain"


# --- Markdown, safely ----------------------------------------------------------------

# a link; an image's `![alt](url)` stays text: nothing is fetched from elsewhere
_LINK = re.compile(r"(?<!!)\[([^\]\n]{1,300})\]\((https?://[^\s()]{1,2000})\)")
_CODE = re.compile(r"`([^`\n]{1,500})`")
_STRONG = re.compile(r"\*\*([^*\n]{1,500})\*\*")
_EM = re.compile(r"(?<![*\w])\*([^*\n]{1,500})\*(?!\*)")


def _inline(escaped: str) -> str:
    """Inline marks in already-escaped text: the URL was escaped with the rest, so it can
    close no attribute; only http(s) is ever linked."""
    spans: list[str] = []

    def keep(html_span: str) -> str:
        spans.append(html_span)
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE.sub(lambda m: keep(f"<code>{m.group(1)}</code>"), escaped)
    text = _LINK.sub(lambda m: keep(
        f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow">{m.group(1)}</a>'), text)
    text = _STRONG.sub(r"<strong>\1</strong>", text)
    text = _EM.sub(r"<em>\1</em>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def markdown(source: str) -> Markup:
    """`source` as safe HTML: headings, paragraphs, lists, fenced code, inline code,
    emphasis and http(s) links; everything else is text."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    code: list[str] | None = None

    def flush() -> None:
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for raw in printable(source, limit=None).splitlines()[:MARKDOWN_LINES]:
        if raw.startswith("```"):
            if code is None:
                flush()
                code = []
            else:
                out.append("<pre><code>" + "\n".join(code) + "</code></pre>")
                code = None
            continue
        line = html.escape(raw, quote=True)
        if code is not None:
            code.append(line)
            continue
        heading = re.match(r"(#{1,6})\s+(.*)", line)
        item = re.match(r"\s*[-*+]\s+(.*)", line)
        if heading:
            flush()
            level = min(len(heading.group(1)) + 2, 6)  # under the page's own headings
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif item:
            if para:
                flush()
            items.append(item.group(1))
        elif not line.strip():
            flush()
        else:
            if items:
                flush()
            para.append(line.strip())
    flush()
    if code is not None:
        out.append("<pre><code>" + "\n".join(code) + "</code></pre>")
    return Markup("\n".join(out))


# --- artifact previews -------------------------------------------------------------------


@dataclass(frozen=True)
class PreviewView:
    name: str  # as shown
    raw_name: str  # as stored: the links quote it
    kind: str  # markdown / json / text / image / download
    body: Markup  # the rendered Markdown, or the escaped text
    cut: bool
    diff: tuple[str, ...]
    previous: str  # the previous version's sha256, shortened


def preview_view(found: Preview) -> PreviewView:
    text = printable(found.text, limit=None)
    body = markdown(text) if found.kind == "markdown" else Markup(
        html.escape(text, quote=True))
    return PreviewView(name=one_line(found.name), raw_name=found.name, kind=found.kind,
                       body=body, cut=found.cut, diff=tuple(one_line(d) for d in found.diff),
                       previous=found.previous[:12])
