"""Stored text made safe to show a person: in a terminal, in Markdown, on the board.

Every string a run holds came from someone (a worker, a command's output, a remote
server's error), so none of it may steer what displays it. Three rules, one per helper:

- `printable`: no control character reaches the screen. Every C0/C1 control, DEL, the
  bidirectional overrides and the Unicode line separators are shown as escaped text
  (`\\x1b`, `\\u202e`); only the newline stays (a CRLF reads as a newline). A terminal never
  sees an escape sequence (`\\x1b]52;…` would write the clipboard).
- `one_line`: the same, and a newline is shown as `\\n`, so a one-line field (a title, a
  name, a reason in a table row) never spans lines.
- `md_inline` / `md_block`: the same, plus Markdown escaping, so user text can never open
  a heading, a list, a quote, a code fence or span, an HTML tag, a table cell or a link of
  its own. `md_block` keeps the text's line breaks as hard breaks.

Each caps what it shows of one field at `FIELD_LIMIT` characters, then says how much it
left out (`… (20971520 more bytes)`): a 20 MB note stays readable. JSON output never
passes through here; it is data, escaped by JSON itself.
"""

from __future__ import annotations

import re

FIELD_LIMIT = 4096  # characters of one field a human view shows
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e"
                       "\u2066-\u2069\ufeff]")
_MD_ANYWHERE = re.compile(r"([\\`*_\[\]<>|!&~#@])")
_MD_LINE_START = re.compile(r"^([-+=]|\d+(?=[.)]))")
_AUTOLINK = re.compile(r"(?i)(?<=[a-z])(:)(?=//)|(?<=\bwww)(\.)")


def capped(text: str, limit: int | None = FIELD_LIMIT) -> str:
    """`text`, or its first `limit` characters and how many bytes were left out."""
    if limit is None or len(text) <= limit:
        return text
    rest = len(text[limit:].encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}… ({rest} more bytes)"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, limit: int | None = FIELD_LIMIT) -> str:
    """`text` with every control character but the newline shown as escaped text."""
    return _CONTROLS.sub(_escape, capped(text, limit).replace("\r\n", "\n"))


def one_line(text: str, *, limit: int | None = FIELD_LIMIT) -> str:
    """`printable`, and a newline shown as `\\n`: the field stays on its line."""
    return printable(text, limit=limit).replace("\n", "\\n")


def md_inline(text: str, *, limit: int | None = FIELD_LIMIT) -> str:
    """One line of Markdown that reads as `text` and does nothing else, wherever it is put
    (after a `# `, in a list item, in a table cell, or at the start of a line)."""
    return _md_line(one_line(text, limit=limit).strip())


def md_block(text: str, *, limit: int | None = FIELD_LIMIT) -> str:
    """Paragraphs of Markdown that read as `text`: each of its lines escaped as `md_inline`,
    kept apart by hard line breaks; a blank line stays a paragraph break."""
    lines = [_md_line(line.strip()) for line in printable(text, limit=limit).split("\n")]
    out: list[str] = []
    for line in lines:
        if out and out[-1] and line:
            out[-1] += "\\"  # a hard break: the next line is a new line, not a new block
        out.append(line)
    return "\n".join(out).strip("\n")


def _md_line(line: str) -> str:
    line = _MD_ANYWHERE.sub(r"\\\1", line)
    line = _AUTOLINK.sub(lambda m: "\\" + m.group(), line)
    return _MD_LINE_START.sub(lambda m: _escape_start(m.group()), line, count=1)


def _escape_start(start: str) -> str:
    """A line-start marker made literal: `-`, `+`, `=` get a backslash before them; a run
    of digits gets one after it, before its `.` or `)` (`1.` becomes `1\\.`)."""
    return "\\" + start if not start.isdigit() else start + "\\"
