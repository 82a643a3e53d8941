"""The one place the exception root becomes an HTTP status and the error document
`{"error": {"code", "message", "hint", "next"}}`, each next step worded as the route that
takes it (`next`: method, path, the body's known fields and those to fill in, whose token);
Litestar's own refusals (malformed JSON, a body too large, an unknown route) are given the
same shape here."""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote, urlencode

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec

from waypost import errors
from waypost.errors import Step

# Most specific first: the first class an error is an instance of decides its status.
STATUSES: Final[tuple[tuple[type[errors.WaypostError], int], ...]] = (
    (errors.TooLarge, 413),
    (errors.Unauthenticated, 401),
    (errors.NotAuthorized, 403),
    (errors.IllegalTransition, 409),
    (errors.RuleViolation, 409),
    (errors.StaleLease, 409),
    (errors.IntegrityError, 500),
    (errors.UnsupportedMedia, 415),
    (errors.TooDeep, 400),
    (errors.Refused, 403),
    (errors.InvalidInput, 422),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.StoreBusy, 503),
    (errors.DiskFull, 503),
    (errors.StoreUnreachable, 503),
)
LITESTAR_CODES: Final[dict[int, str]] = {
    400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type",
    429: "too_many_requests"}

LITESTAR_HINTS: Final[dict[int, str]] = {
    400: "send a JSON body (the operation's schema: GET /schema/openapi.json)",
    404: "see the routes: GET /schema",
    405: "see the routes and their methods: GET /schema",
    413: "send less: an artifact streams to /api/runs/RUN/artifacts/NAME under its own limit",
}


class NextRoute(msgspec.Struct, frozen=True, kw_only=True):
    verb: str  # the operation, as every door names it (unblock, claim, review, …)
    method: str | None  # None: no route of this API takes it
    path: str | None  # with its query, if any
    body: dict[str, Any] | None = None  # the JSON body's fields known (an artifact: bytes)
    fill: list[str] = []  # the body's fields still to give (`content`: an artifact's bytes)
    actor: str | None = None  # whose token takes it (null: the caller's)


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    code: str  # stable, e.g. not_found, not_authorized, stale_lease
    message: str  # what was refused and why
    hint: str  # what to do next, in words (each step as its route)
    next: NextRoute | None = None  # the first next step, as data
    also: list[NextRoute] = []  # any further steps (another blocker, another way)


class ErrorDocument(msgspec.Struct, frozen=True, kw_only=True):
    error: ErrorBody


# the route of each shared verb other than POST /api/runs/{run}/{verb}
ROUTES: Final[dict[str, tuple[str, str] | None]] = {
    "read": ("GET", "/api/runs/{run}"), "list": ("GET", "/api/runs"),
    "start": ("POST", "/api/runs"), "artifact": ("POST", "/api/runs/{run}/artifacts/{name}"),
    "add_gate": ("POST", "/api/runs/{run}/gates"),
    "adopt_gate": ("POST", "/api/runs/{run}/gates/adopt"), "deliver": None}


def next_route(step: Step) -> NextRoute:
    """A step as the request that takes it."""
    route = ROUTES.get(step.verb, ("POST", f"/api/runs/{{run}}/{step.verb}"))
    if route is None:
        return NextRoute(verb=step.verb, method=None, path=None, actor=step.actor)
    body, fill = step.fields()
    path = route[1].replace("{run}", quote(step.run or "RUN", safe=""))
    if step.verb == "artifact":  # the name in the path, the role in the query, bytes
        path = path.replace("{name}", quote(body.pop("name", "NAME"), safe=""))
        path += f"?{urlencode({'role': body.pop('role')})}" if "role" in body else ""
        body.pop("content", None)
    if "command" in body:  # the API's name for a command's argument list
        body["argv"] = body.pop("command")
    return NextRoute(verb=step.verb, method=route[0], path=path,
                     body=(body or None) if route[0] == "POST" else None,
                     fill=["argv" if n == "command" else n for n in fill], actor=step.actor)


def route_text(step: Step) -> str:
    """A step in words: `POST /api/runs/wp_…/unblock {"blocker":"b1"} + resolution`."""
    route = next_route(step)
    said = (f"{route.method} {route.path}" if route.method is not None
            else f"{step.verb}, which no route of this API takes")
    if route.body:
        said += " " + msgspec.json.encode(route.body).decode()
    if route.fill:
        said += " + " + ", ".join(route.fill)
    return said if route.actor is None else f"{said}, with {route.actor}'s token"


def status_of(exc: errors.WaypostError) -> int:
    return next((status for cls, status in STATUSES if isinstance(exc, cls)), 500)


def document(code: str, message: str, hint: str = "") -> ErrorDocument:
    return ErrorDocument(error=ErrorBody(code=code, message=message, hint=hint))


def error_body(exc: errors.WaypostError) -> ErrorBody:
    """The error with its hint and steps worded as routes."""
    routes = [next_route(s) for s in exc.steps]
    return ErrorBody(code=exc.code, message=exc.message, hint=exc.hint_with(route_text),
                     next=routes[0] if routes else None, also=routes[1:])


def waypost_error(_: Request[Any, Any, Any], exc: errors.WaypostError
                  ) -> Response[ErrorDocument]:
    status = status_of(exc)
    headers = {503: {"Retry-After": "1"}, 401: {"WWW-Authenticate": "Bearer"}}.get(status)
    return Response(ErrorDocument(error=error_body(exc)), status_code=status, headers=headers)


def litestar_error(_: Request[Any, Any, Any], exc: HTTPException
                   ) -> Response[ErrorDocument]:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        body = document("invalid_request", _validation_message(exc),
                        "send a JSON body matching the operation's schema (GET /schema)")
    else:
        body = document(LITESTAR_CODES.get(status, "error"), str(exc.detail),
                        LITESTAR_HINTS.get(status, ""))
    return Response(body, status_code=status, headers=exc.headers)


def unexpected(_: Request[Any, Any, Any], exc: Exception) -> Response[ErrorDocument]:
    return Response(document("error", f"the server failed unexpectedly ({type(exc).__name__})",
                             "try again; if it persists, see the server's log"),
                    status_code=500)


def _validation_message(exc: ValidationException) -> str:
    extra = exc.extra if isinstance(exc.extra, list) else []
    details = "; ".join(str(item.get("message", item)) if isinstance(item, dict) else str(item)
                        for item in extra[:5])
    return f"{exc.detail}: {details}"[:1000] if details else str(exc.detail)


WHY: Final = {
    400: "Malformed: not JSON, nested deeper than 64 levels, or not the operation's schema.",
    401: "No token, or one that is unknown, expired or revoked.",
    403: "The token's role or run may not do this, or the rules refuse this actor.",
    404: "No such run, blocker or artifact.",
    409: "The run's state or lease refuses the move, or the Idempotency-Key was reused.",
    413: "The body is larger than the server takes.",
    415: "The body is not sent as the media type the route takes (JSON: application/json; "
         "an artifact: application/octet-stream).",
    422: "Well-formed, but a value is not acceptable (a limit, a duration, a URI).",
    503: "The store is busy; try again (Retry-After).",
}
# Every operation's error answers, for the OpenAPI document.
ERRORS: Final = {status: ResponseSpec(ErrorDocument, description=why, generate_examples=False)
                 for status, why in WHY.items()}

HANDLERS: Final = {errors.WaypostError: waypost_error, HTTPException: litestar_error,
                   Exception: unexpected}
