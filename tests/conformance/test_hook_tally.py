"""The hooks' tallies of refusals off a run, on both backends and in memory: one stop of one
turn counts once, a reset starts over, the cap lets the agent stop (for good, for a token
that never works again), and the memory keeps a bounded number of keys."""

from __future__ import annotations

import pytest

from waypost.hooks.cap import MemoryTally, SettingsTally, Tally, counted, read_cap
from waypost.hooks.decide import StopDecision
from waypost.store import Store

REFUSED = StopDecision(block=True, reason="waypost: not yet")


def let_go(blocks: int) -> str:
    return f"let go after {blocks}"


@pytest.fixture(params=["settings", "memory"])
def tally(request: pytest.FixtureRequest, store: Store) -> Tally:
    return SettingsTally(store) if request.param == "settings" else MemoryTally()


def test_a_turn_counts_once_and_a_reset_starts_over(tally: Tally) -> None:
    assert [tally.add("hook.t.a", "turn-1") for _ in range(3)] == [1, 1, 1]
    assert tally.add("hook.t.a", "turn-2") == 2
    assert tally.add("hook.t.a", None) == 3  # a stop naming no turn always counts
    assert tally.add("hook.t.b", "turn-2") == 1  # a key is its own
    assert tally.peek("hook.t.a") == 3
    tally.clear("hook.t.a")
    assert tally.peek("hook.t.a") == 0
    assert tally.add("hook.t.a", "turn-2") == 1  # the reset forgot the turn


def test_past_the_cap_the_agent_may_stop_and_the_count_starts_over(tally: Tally) -> None:
    said = [counted(tally, "hook.t.c", REFUSED, cap=2, turn=None, let_go=let_go)
            for _ in range(4)]
    assert [s.block for s in said] == [True, True, False, True]
    assert said[2].reason == "let go after 2"


def test_a_refusal_for_good_lets_every_later_stop_go(tally: Tally) -> None:
    said = [counted(tally, "hook.t.d", REFUSED, cap=2, turn=None, let_go=let_go,
                    for_good=True) for _ in range(5)]
    assert [s.block for s in said] == [True, True, False, False, False]
    assert tally.peek("hook.t.d") == 3  # nothing written once past the cap


def test_the_settings_tally_lives_in_the_store(store: Store) -> None:
    SettingsTally(store).add("hook.t.e", None)
    assert SettingsTally(store).peek("hook.t.e") == 1  # another process's view
    assert "hook.t.e" in store.settings()


def test_the_memory_keeps_a_bounded_number_of_keys() -> None:
    memory = MemoryTally(limit=3)
    for key in "abcd":
        memory.add(key, None)
    memory.add("b", None)  # b is counted most recently; a went first, then c
    memory.add("e", None)
    assert [memory.peek(k) for k in "abcde"] == [0, 2, 0, 1, 1]


@pytest.mark.parametrize(("text", "cap"), [("1", 1), ("8", 8), (" 1000 ", 1000)])
def test_a_cap_reads_from_1_to_1000(text: str, cap: int) -> None:
    assert read_cap(text) == cap


@pytest.mark.parametrize("text", ["0", "1001", "-1", "+5", "lots", "", "1e3"])
def test_any_other_cap_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="from 1 to 1000"):
        read_cap(text)
