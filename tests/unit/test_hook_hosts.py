"""Each host's hook JSON read into one call and the answer written in the host's format,
pure; the settings merge for every host; the project's `[hooks] require_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_a2a import RESULT, packet
from waypost.config import load_config
from waypost.errors import InvalidInput
from waypost.hooks import decide as hooks
from waypost.hooks import hosts as hook_hosts
from waypost.hooks import settings as hook_settings
from waypost.model import State

LIMIT = 1 << 20
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=20), inner, max_size=4),
                           max_leaves=20)
fields = st.sampled_from(["hook_event_name", "session_id", "conversation_id", "agent_id",
                          "subagent_id", "generation_id", "loop_count", "other"])


@settings(deadline=None)  # the first example pays for imports on a busy machine
@given(host=st.sampled_from(hook_hosts.HOSTS),
       event=st.sampled_from([*hook_hosts.STOPS, *hook_hosts.CONTEXTS, "nope"]),
       document=st.dictionaries(fields, json_values | st.sampled_from(
           ["Stop", "AfterAgent", "stop", "SessionStart", "sessionStart", "s-1"]), max_size=8))
def test_any_input_is_a_call_or_invalid_input(host: str, event: str,
                                              document: dict[str, Any]) -> None:
    try:
        call = hook_hosts.read_call(host, event, json.dumps(document).encode(), LIMIT)
    except InvalidInput:
        return
    assert call.session.strip()
    assert len(call.session) <= hook_hosts.MAX_ID
    assert document["hook_event_name"] in hook_hosts.EVENT_NAMES[host][event]


@settings(deadline=None)  # the first example pays for imports on a busy machine
@given(host=st.sampled_from(hook_hosts.HOSTS), event=st.sampled_from(hook_hosts.STOPS),
       block=st.booleans(), reason=st.text(max_size=200))
def test_a_stop_answer_is_the_hosts_json(host: str, event: str, block: bool,
                                         reason: str) -> None:
    out, err = hook_hosts.render(host, event, hooks.StopDecision(block=block, reason=reason))
    if host in ("gemini", "cursor"):  # stdout must be JSON alone
        said = json.loads(out)
        assert said == ({} if not block else {"followup_message": reason} if host == "cursor"
                        else {"decision": "deny", "reason": reason})
    elif block:
        assert json.loads(out) == {"decision": "block", "reason": reason}
    else:
        assert out == ""
    assert err == ("" if block else reason)


def test_cursor_names_its_turn_and_the_others_do_not() -> None:
    cursor = hook_hosts.read_call("cursor", "stop", json.dumps({
        "hook_event_name": "stop", "conversation_id": "c1", "generation_id": "g1",
        "loop_count": 2, "status": "completed"}).encode(), LIMIT)
    assert (cursor.session, cursor.turn) == ("c1", ("g1", "2"))
    codex = hook_hosts.read_call("codex", "stop", json.dumps({
        "hook_event_name": "Stop", "session_id": "s1", "turn_id": "t1"}).encode(), LIMIT)
    assert codex.turn is None  # a refused Codex stop goes on in the same turn: count each
    assert hooks.turn_key(("g1", "2"), 7) != hooks.turn_key(("g1", "2"), 8)


def test_claude_reads_the_input_cursor_gives_it() -> None:
    """Cursor runs Claude Code's hooks: its own event name and conversation id."""
    call = hook_hosts.read_call("claude", "stop", json.dumps({
        "hook_event_name": "stop", "conversation_id": "c1", "generation_id": "g1",
        "loop_count": 0}).encode(), LIMIT)
    assert (call.session, call.turn) == ("c1", ("g1", "0"))


def test_no_run_is_refused_only_when_the_project_requires_one() -> None:
    assert not hooks.decide_stop(None, "s 1").block
    required = hooks.decide_stop(None, "s 1", require_run=True)
    assert required.block
    assert required.reason.endswith("waypost start TITLE --target URI --session 's 1'")
    assert hooks.no_run_context("s", require_run=False).text is None
    assert "--session s" in str(hooks.no_run_context("s", require_run=True).text)


@pytest.mark.parametrize("state", list(State))
def test_the_status_line_is_one_line_naming_the_run(state: State) -> None:
    line = hooks.status_line(packet(state, result=RESULT, title="two\nlines"))
    assert line.startswith("waypost: run wp_01TEST (two\\nlines) ")
    assert "\n" not in line


@pytest.mark.parametrize("text", ["[hooks]\nrequire_run = true\n",
                                  "[hooks]\nrequire_run = false\n", ""])
def test_require_run_is_read_from_the_project(tmp_path: Path, text: str) -> None:
    (tmp_path / "waypost.toml").write_text(text)
    assert load_config(tmp_path).require_run is ("true" in text)


@pytest.mark.parametrize("text", ['[hooks]\nrequire_run = "yes"\n', "[hooks]\nstrict = 1\n",
                                  "hooks = 1\n"])
def test_a_bad_hooks_table_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "waypost.toml").write_text(text)
    with pytest.raises(InvalidInput):
        load_config(tmp_path)


settings_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["hooks", "type", "command", "matcher", "Stop", "stop", "x"]), inner,
        max_size=3), max_leaves=15)


@settings(deadline=None)  # the first example pays for imports on a busy machine
@given(host=st.sampled_from(hook_hosts.HOSTS),
       document=st.dictionaries(st.sampled_from(["hooks", "model", "version"]), settings_values,
                                max_size=3))
def test_install_is_idempotent_and_uninstall_keeps_every_other_hook(
        host: str, document: dict[str, Any]) -> None:
    try:
        once = hook_settings.install(host, document)
    except ValueError:
        return
    assert hook_settings.install(host, once) == once
    back = hook_settings.uninstall(once)
    assert emptied(back) == emptied(document)
    assert "waypost hook " not in json.dumps(back)


def emptied(document: dict[str, Any]) -> dict[str, Any]:
    """The document as the host reads it: an empty event list, or an empty "hooks" object,
    is the same as none (uninstall cannot tell one install made from one it appended to)."""
    events = document.get("hooks")
    if not isinstance(events, dict):
        return document
    kept = {e: v for e, v in events.items() if v != []}
    return {k: v for k, v in document.items() if k != "hooks"} | ({"hooks": kept} if kept
                                                                   else {})
