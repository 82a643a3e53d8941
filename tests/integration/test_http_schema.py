"""schemathesis (4.x) against the app's own OpenAPI document, in-process: for every
operation, generated requests (valid and not) never get a 5xx, and every answer matches
the document (status, content type, body schema). Each case acts on a run of its own, so
the generated bodies reach the rules instead of stopping at a 404. The board's event
stream is left out: a stream never ends."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import waypost
from waypost.http.app import create_app
from waypost.http.settings import ServerConfig
from waypost.usecases import tokens

# The schema is read when the tests are collected (schemathesis' lazy `from_fixture` does
# not run under pytest 9), so the store and the app are the module's.
FOLDER = tempfile.TemporaryDirectory(prefix="waypost-schema-")
STORE = waypost.open_store(str(Path(FOLDER.name) / "w.db"))
SECRET, _ = tokens.issue(STORE, holder="alice", role="owner", run_id=None, ttl=None, by="test")
APP = create_app(ServerConfig(store_url=str(Path(FOLDER.name) / "w.db")), store=STORE)
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", APP).exclude(path="/events")


@pytest.fixture(scope="module", autouse=True)
def _close_the_store() -> Iterator[None]:
    yield
    STORE.close()
    FOLDER.cleanup()


@schema.parametrize()
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_every_operation_answers_as_documented_and_never_5xx(
        case: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "schemathesis")  # unset: 503 by design
    if "run_id" in (case.path_parameters or {}):
        run, _ = waypost.start(STORE, "schemathesis", actor="alice", owner="alice",
                               target="none:", worker="alice")
        case.path_parameters["run_id"] = run.id
    case.call_and_validate(headers={"Authorization": f"Bearer {SECRET}"}, checks=[
        not_a_server_error, status_code_conformance, content_type_conformance,
        response_schema_conformance])
