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
# The control characters (but the newline) and the invisible marks that reorder or hide
# text, each shown as its escape: a translation table, built with no regular expression to
# compile, since every hot verb prints through `printable`.
_CONTROL_CODES = (*range(0x00, 0x0A), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E,
                  0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A), 0xFEFF)
_ESCAPED = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
            for code in _CONTROL_CODES}
# Markdown's patterns are compiled on first use (by `re`'s own cache): only renderers use them.
_MD_ANYWHERE = r"([\\`*_\[\]<>|!&~#@])"
_MD_LINE_START = r"^([-+=]|\d+(?=[.)]))"
_AUTOLINK = r"(?i)(?<=[a-z])(:)(?=//)|(?<=\bwww)(\.)"


def capped(text: str, limit: int | None = FIELD_LIMIT) -> str:
    """`text`, or its first `limit` characters and how many bytes were left out."""
    if limit is None or len(text) <= limit:
        return text
    rest = len(text[limit:].encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}… ({rest} more bytes)"


def printable(text: str, *, limit: int | None = FIELD_LIMIT) -> str:
    """`text` with every control character but the newline shown as escaped text."""
    return capped(text, limit).replace("\r\n", "\n").translate(_ESCAPED)


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
    line = re.sub(_MD_ANYWHERE, r"\\\1", line)
    line = re.sub(_AUTOLINK, lambda m: "\\" + m.group(), line)
    return re.sub(_MD_LINE_START, lambda m: _escape_start(m.group()), line, count=1)


def _escape_start(start: str) -> str:
    """A line-start marker made literal: `-`, `+`, `=` get a backslash before them; a run
    of digits gets one after it, before its `.` or `)` (`1.` becomes `1\\.`)."""
    return "\\" + start if not start.isdigit() else start + "\\"
