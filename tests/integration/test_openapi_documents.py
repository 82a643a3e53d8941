"""The API's OpenAPI document, as a real server serves it: /schema/openapi.json and
/schema/openapi.yaml are one document, each read by a plain JSON or a safe YAML reader,
and each valid for an independent validator (openapi-spec-validator). What a route
answers is listed there: a start repeated under the same Idempotency-Key answers 200, and
that answer fits the schema the document gives it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

import waypost
from tests.http_support import Api, issue, serving


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    path = str(tmp_path_factory.mktemp("openapi") / "w.db")
    with waypost.open_store(path):
        pass
    with serving(path) as base:
        yield Api(base, issue(path, "alice", "owner"))


@pytest.fixture(scope="module")
def document(owner: Api) -> dict[str, Any]:
    answer = httpx.get(owner.url + "/schema/openapi.json", timeout=30)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_the_json_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_yaml_document_is_the_json_one_read_by_a_safe_reader(
        owner: Api, document: dict[str, Any]) -> None:
    answer = httpx.get(owner.url + "/schema/openapi.yaml", timeout=30)
    assert answer.status_code == 200, answer.text
    assert "!!python" not in answer.text, "a tag only Python's unsafe loader reads"
    read = yaml.safe_load(answer.text)
    validate(read, cls=OpenAPIV31SpecValidator)
    assert read == document


def answer_schema(document: dict[str, Any], path: str, method: str,
                  status: int) -> dict[str, Any]:
    """The schema the document gives a route's answer of `status`, its references
    resolved against the whole document."""
    responses = document["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path} never answers {status}, it says"
    schema = responses[str(status)]["content"]["application/json"]["schema"]
    return {**schema, "components": document["components"]}


def test_a_repeated_idempotency_key_answers_200_as_documented(
        owner: Api, document: dict[str, Any]) -> None:
    responses = document["paths"]["/api/runs"]["post"]["responses"]
    assert {"200", "201"} <= responses.keys()
    key = {"Idempotency-Key": "openapi-200"}
    body = {"title": "Deploy", "target": "none:"}
    first = owner.post("/api/runs", body, headers=key)
    again = owner.post("/api/runs", body, headers=key)
    assert (first.status_code, again.status_code) == (201, 200), again.text
    assert again.json()["created"] is False
    for answer in (first, again):
        schema = answer_schema(document, "/api/runs", "post", answer.status_code)
        jsonschema.Draft202012Validator(schema).validate(answer.json())
