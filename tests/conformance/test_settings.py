"""Store-level settings: the same for every process using the store, on every backend."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waypost.errors import InvalidInput
from waypost.store import Store
from waypost.store.shared import MAX_SETTING_VALUE


def test_a_new_store_has_no_settings(store: Store) -> None:
    assert store.settings() == {}


def test_settings_are_set_replaced_and_removed(store: Store) -> None:
    store.put_setting("limits.title", "200")
    store.put_setting("limits.note", "4000")
    assert store.settings() == {"limits.title": "200", "limits.note": "4000"}
    store.put_setting("limits.title", "300")
    assert store.settings() == {"limits.title": "300", "limits.note": "4000"}
    store.put_setting("limits.note", None)
    store.put_setting("never.set", None)  # removing what is not there is no error
    assert store.settings() == {"limits.title": "300"}


def test_settings_are_shared_by_every_process_of_the_store(store: Store) -> None:
    from waypost.store import open_store

    store.put_setting("limits.title", "120")
    url = getattr(store, "path", None) or store.url
    if "***" in url:
        pytest.skip("the store's URL is shown without its password")
    with open_store(url) as other:
        assert other.settings() == {"limits.title": "120"}


@pytest.mark.parametrize(("name", "value"), [
    ("", "1"), ("Limits.Title", "1"), ("limits title", "1"), ("x" * 65, "1"),
    ("limits.title", "x" * (MAX_SETTING_VALUE + 1)), ("limits.title", "a\x00b"),
])
def test_a_malformed_setting_is_refused_and_changes_nothing(store: Store, name: str,
                                                             value: str) -> None:
    store.put_setting("kept", "yes")
    with pytest.raises(InvalidInput):
        store.put_setting(name, value)
    assert store.settings() == {"kept": "yes"}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(st.characters(blacklist_characters="\x00", codec="utf-8"),
                     max_size=300))
def test_any_value_reads_back_as_written(store: Store, value: str) -> None:
    store.put_setting("any", value)
    assert store.settings()["any"] == value
