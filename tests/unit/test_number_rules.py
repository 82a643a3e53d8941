"""One rule for numbers at every door (`waypost.inputs`, `waypost.durations`): a boolean is
not a number, and only ASCII digits are digits, so `True` is no epoch and a duration or a
number written in Arabic-Indic, Devanagari or full-width digits is refused in the same
words as any other bad number."""

from __future__ import annotations

import pytest

from waypost import inputs
from waypost.durations import parse_duration
from waypost.errors import InvalidInput


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_no_whole_number(value: bool) -> None:
    with pytest.raises(InvalidInput, match="whole number"):
        inputs.epoch(value)
    with pytest.raises(InvalidInput, match="whole number"):
        inputs.row_limit(value)


@pytest.mark.parametrize("text", ["\uff11", "\u0660.\u0665", "\u0967"])
def test_digits_of_other_scripts_are_no_number(text: str) -> None:
    with pytest.raises(InvalidInput, match="finite number"):
        inputs.finite(text, "progress", low=0, high=1)
    with pytest.raises(InvalidInput, match="whole number"):
        inputs.epoch(text)


@pytest.mark.parametrize("text", ["\u0661\u0660m", "\uff11\uff10s", "\uff11h"])
def test_a_duration_in_other_scripts_digits_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="bad duration"):
        parse_duration(text, "--max-silence")


def test_ascii_numbers_still_read() -> None:
    assert inputs.epoch("3") == 3
    assert inputs.finite("0.5", "progress", low=0, high=1) == 0.5
    assert parse_duration("1h30m", "--max-silence") == 5400
