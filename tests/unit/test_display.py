"""Stored text made safe to show: no control character reaches a terminal, no user text
opens Markdown structure of its own, and a huge field is capped, saying what it left out.
Durations for people read exactly, never rounded up."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from waypost.display import FIELD_LIMIT, capped, md_block, md_inline, one_line, printable
from waypost.durations import format_duration, parse_duration

OSC52 = "\x1b]52;c;ZWNobyBoaQ==\x07"  # writes the clipboard of the terminal that prints it
# What may open a block of its own at the start of a line: ATX heading, quote, list item,
# thematic break or setext underline, fence, HTML block, table row, indented code.
BLOCK_START = re.compile(r"^(#|>|[-+*=_]|\d+[.)]|`|~|<|\||\s)")
# Inline structure: an unescaped backtick, bracket, angle bracket, emphasis, entity or pipe.
UNESCAPED = re.compile(r"(?<!\\)(?:\\\\)*[`\[\]<>*_&|]")


def controls(text: str) -> set[str]:
    return {c for c in text if unicodedata.category(c) == "Cc" and c != "\n"}


@pytest.mark.parametrize(("raw", "shown"), [
    (OSC52, "\\x1b]52;c;ZWNobyBoaQ==\\x07"),
    ("red \x1b[31mX\x1b[0m", "red \\x1b[31mX\\x1b[0m"),
    ("a\r\nb\rc", "a\nb\\x0dc"),
    ("tab\there", "tab\\x09here"),
    ("c1 \x9b31m", "c1 \\x9b31m"),
    ("del \x7f", "del \\x7f"),
    ("bidi \u202eevil", "bidi \\u202eevil"),
    ("café ☕", "café ☕"),
])
def test_printable_shows_every_control_but_the_newline(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_one_line_keeps_a_field_on_its_line() -> None:
    assert one_line("x\n## Approval\napproved") == "x\\n## Approval\\napproved"
    assert one_line("x\u2028y") == "x\\u2028y"


def test_a_huge_field_is_capped_and_says_how_much_was_left_out() -> None:
    note = "é" * (FIELD_LIMIT + 10)
    assert capped(note) == "é" * FIELD_LIMIT + "… (20 more bytes)"
    assert printable("x" * 20_000_000).endswith(f"… ({20_000_000 - FIELD_LIMIT} more bytes)")
    assert capped(note, None) == note


@pytest.mark.parametrize(("raw", "shown"), [
    ("x\n## Approval\napproved by mallory", "x\\\\n\\#\\# Approval\\\\napproved by mallory"),
    ("# heading", "\\# heading"),
    ("- item", "\\- item"),
    ("1. first", "1\\. first"),
    ("12) first", "12\\) first"),
    ("```python", "\\`\\`\\`python"),
    ("<script>alert(1)</script>", "\\<script\\>alert(1)\\</script\\>"),
    ("[click](https://evil.example)", "\\[click\\](https\\://evil.example)"),
    ("see www.evil.example", "see www\\.evil.example"),
    ("a | b", "a \\| b"),
    ("    indented", "indented"),
    ("===", "\\==="),
    ("plain words, and 3.5 apples", "plain words, and 3.5 apples"),
])
def test_md_inline_reads_as_the_text_and_does_nothing_else(raw: str, shown: str) -> None:
    assert md_inline(raw) == shown


def test_md_block_keeps_lines_as_hard_breaks_and_blank_lines_as_paragraphs() -> None:
    assert md_block("one\n# two\n\n- three") == "one\\\n\\# two\n\n\\- three"


@given(st.text())
@example(OSC52)
@example("\r\n\x85\u2028")
def test_printable_leaves_no_control_but_the_newline(text: str) -> None:
    assert controls(printable(text)) == set()
    assert "\n" not in one_line(text)


@given(st.text(alphabet=st.characters(codec="utf-8"))
       | st.text(alphabet="#>-+*=_`~<>|[]()!&\\ \t\n1.)abc:/w@"))
@example("x\n## Approval\napproved by mallory")
@example("1. a")
@example("  - a")
@example("\\# x")
@example("\\\\`code`")
def test_md_inline_never_opens_structure(text: str) -> None:
    shown = md_inline(text)
    assert "\n" not in shown
    assert "\r" not in shown
    assert controls(shown) == set()
    assert not BLOCK_START.match(shown), shown
    assert not UNESCAPED.search(shown), shown


@given(st.text(alphabet="#>-+*=_`~<>|[]!&\\ \t\n1.)ab"))
def test_md_block_never_opens_structure_on_any_line(text: str) -> None:
    for line in md_block(text).split("\n"):
        assert not BLOCK_START.match(line), line
        assert not UNESCAPED.search(line.removesuffix("\\") if line.endswith("\\")
                                    and not line.endswith("\\\\") else line), line


# --- durations --------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.4, "0s"), (59.9, "59s"), (60, "1m"), (90, "1m30s"), (125, "2m05s"),
    (3600, "1h"), (5400, "1h30m"), (7500, "2h05m"), (7199, "1h59m"), (86399, "23h59m"),
    (86400, "1d"), (97200, "1d03h"), (90 * 86400, "90d"), (-90, "1m30s"),
])
def test_format_duration_is_short_and_never_rounded_up(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10 * 365 * 86400))
def test_format_duration_reads_back_within_its_smaller_unit(seconds: int) -> None:
    back = parse_duration(format_duration(seconds))
    unit = 1 if seconds < 3600 else 60 if seconds < 86400 else 3600
    assert back <= seconds < back + unit
