"""The API's browsable reference at /schema: every operation (method, path, summary, its
parameters, body and answers) as plain HTML rendered here from the OpenAPI document, with
no script and nothing loaded from elsewhere (the UI plugins Litestar ships load theirs
from a CDN); and the document's values made plain JSON, for its YAML rendering."""

from __future__ import annotations

import dataclasses
from html import escape
from typing import Any, Final

from litestar import Request
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.openapi.spec import Schema

VALUES: Final = ("default", "const", "enum", "example", "examples")  # a Schema's JSON values


def plain_values(document: object) -> None:
    """Every schema's values (default, const, enum, examples) as JSON holds them. A field
    whose default is msgspec's empty tuple was documented with a Python tuple, which the
    YAML rendering wrote as `!!python/tuple`: no YAML reader but Python's unsafe one takes
    it. Each object of the document is visited once."""
    seen: set[int] = set()
    todo: list[object] = [document]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Schema):
            for name in VALUES:
                if getattr(item, name) is not None:
                    setattr(item, name, _plain(getattr(item, name)))
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            todo += [getattr(item, f.name) for f in dataclasses.fields(item)]
        elif isinstance(item, list | tuple):
            todo += item
        elif isinstance(item, dict):
            todo += item.values()


def _plain(value: object) -> object:
    if isinstance(value, list | tuple):
        return [_plain(each) for each in value]
    if isinstance(value, dict):
        return {key: _plain(each) for key, each in value.items()}
    return value

STYLE = ("body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;"
         "padding:0 1rem}code{font-size:90%}section{border-top:1px solid #ddd;padding:.5rem 0}"
         ".m{font-weight:bold;text-transform:uppercase;margin-right:.5rem}")


class PlainDocs(OpenAPIRenderPlugin):
    def __init__(self) -> None:
        super().__init__(path="/", style="")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        info = openapi_schema.get("info", {})
        parts = [f"<!doctype html><meta charset=utf-8><title>{escape(info.get('title', ''))} "
                 f"API</title><style>{STYLE}</style><h1>{escape(info.get('title', ''))} "
                 "HTTP API</h1><p>The OpenAPI 3.1 document: <a href=openapi.json>JSON</a>, "
                 "<a href=openapi.yaml>YAML</a>. Every request carries "
                 "<code>Authorization: Bearer TOKEN</code> (<code>waypost token issue</code>)."
                 "</p>"]
        for path, item in sorted(openapi_schema.get("paths", {}).items()):
            for method, operation in item.items():
                if isinstance(operation, dict) and "responses" in operation:
                    parts.append(_operation(method, path, operation))
        return "".join(parts).encode()


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    params = ", ".join(f"<code>{escape(p['name'])}</code> ({escape(p['in'])})"
                       for p in operation.get("parameters", []))
    body = operation.get("requestBody", {}).get("content", {})
    refs = [escape(str(m.get("schema", {}).get("$ref", "")).rsplit("/", 1)[-1])
            for m in body.values()]
    answers = ", ".join(escape(str(code)) for code in operation["responses"])
    return (f"<section><p><span class=m>{escape(method)}</span><code>{escape(path)}</code>"
            f"</p><p>{escape(operation.get('summary', ''))}</p>"
            + (f"<p>Parameters: {params}</p>" if params else "")
            + (f"<p>Body: <code>{', '.join(r for r in refs if r)}</code></p>" if refs else "")
            + f"<p>Answers: {answers}</p></section>")
