"""The API's OpenAPI document, as a real server serves it: /schema/openapi.json and
/schema/openapi.yaml are one document, each read by a plain JSON or a safe YAML reader,
and each valid for an independent validator (openapi-spec-validator)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
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
