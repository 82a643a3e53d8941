"""The board's HTML: Jinja2 templates rendered to text, autoescaped, strict about names.

Rendered here rather than through Litestar's template config so that the board's pages are
plain functions of their view models (tested without a server) and the app needs no
template setup. Every page carries the same security headers: scripts and styles only from
this server, no framing, forms only to this server, no referrer to other sites.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from waypost.display import printable
from waypost.errors import Step, WaypostError

TEMPLATES: Final = Path(__file__).with_name("templates")
STATIC: Final = Path(__file__).with_name("static")
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a post's Origin "null"
    "Cache-Control": "no-store",
}



def _shown(value: Any) -> Any:
    """Every string a page prints, whatever its source (an error message quotes input too):
    no control character or bidirectional override reaches the browser; then autoescape.
    Markup (`board_story.markdown`) was built from such text, escaped, and stays as it is."""
    if isinstance(value, Markup):
        return value
    return printable(value) if isinstance(value, str) else value


_environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                           undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                           finalize=_shown)


def render(template: str, **context: Any) -> str:
    """The page `template` (a file in templates/) filled from `context`, HTML-escaped."""
    return _environment.get_template(template).render(**context)


def error_shown(exc: WaypostError) -> dict[str, str]:
    """A refusal as a page shows it: its steps as the board's words (a verb on the run,
    what to give, as whom)."""
    return {"code": exc.code, "message": exc.message, "hint": exc.hint_with(step_words)}


def step_words(step: Step) -> str:
    words = [step.verb, *([step.run] if step.run else []),
             *(f"{name} {value}" for name, value in step.args.items())]
    said = " ".join(words)
    if step.fill:
        said += ", giving " + ", ".join(step.fill)
    return said if step.actor is None else f"{said}, as {step.actor}"
