"""The web board: `/` (the runs by state), `/runs/{id}` (one run), its artifacts, the owner's
actions, the sign-in form (and an emailed link's, `board_links`), `/events` (the live feed,
`waypost.http.stream`) and the board's own script and stylesheet (served here, nothing
from a CDN).

Pages are rendered on the server (`board_render`) from pure view models (`board_views`)
over the observed view (`waypost.usecases.views`). What a visitor may do is the access rules'
(`core.access`, the same as the API's) and then the use cases' (`Run`): the board offers a
button only where both would let it through, and decides again when it is pressed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Final, TypeVar
from urllib.parse import quote

import anyio.to_thread
import msgspec
from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter
from litestar.response import Redirect, ServerSentEvent
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler

from waypost import errors
from waypost.core import access
from waypost.core.access import Operation
from waypost.display import printable
from waypost.durations import utcnow
from waypost.http import board_links, board_session, board_views, operations, shapes, stream
from waypost.http.board_render import HEADERS, STATIC, error_shown, render
from waypost.http.board_session import SignIn, Visitor
from waypost.http.deps import ConfigDep, StoreDep
from waypost.http.errors import status_of
from waypost.http.settings import ServerConfig
from waypost.model import Grant, Packet, Role
from waypost.store import Store
from waypost.usecases import previews, reading, tokens
from waypost.usecases.artifacts import safe_name

PAGE: Final = 200  # runs on one page of the board, the most recently started first
ACTIONS: Final = {"review": Operation.REVIEW, "approve": Operation.APPROVE,
                  "changes": Operation.CHANGES, "cancel": Operation.CANCEL,
                  "adopt": Operation.ADOPT_GATE, "unblock": Operation.UNBLOCK,
                  "transfer": Operation.TRANSFER}
FormData = dict[str, list[str]]
BodyT = TypeVar("BodyT")
# the open board's anonymous visitor (`waypost serve --open`), as the read model knows it
OPEN_BOARD: Final = Grant(id="open-board", holder="open board", role=Role.WATCHER,
                          created_at=datetime(2000, 1, 1, tzinfo=UTC), created_by="serve")
RunId = Annotated[str, PathParameter(max_length=64, description="The run's id (wp_…).")]
ArtifactName = Annotated[str, PathParameter(max_length=1000)]
Action = Annotated[str, PathParameter(max_length=40)]
NextPage = Annotated[str | None, QueryParameter(name="next", max_length=100)]
Before = Annotated[int | None, QueryParameter(
    ge=1, description="Show the run's events before this one (the \"show earlier\" link).")]
Inline = Annotated[bool, QueryParameter(description="Show an image in the page.")]
EvidenceId = Annotated[str, PathParameter(max_length=64)]
After = Annotated[str | None, QueryParameter(
    max_length=40, description="The change cursor the page was rendered at (a reconnect "
    "sends Last-Event-ID instead, which wins).")]


def handlers(config: ServerConfig) -> list[ControllerRouterHandler]:
    pages = Router(path="/", route_handlers=[
        board_page, run_page, artifact, evidence_log, sign_in_form, sign_in, sign_out, act,
        board_links.link_page, board_links.use_link],
        exception_handlers={SignIn: _to_sign_in,
                            errors.WaypostError: _error_page},
        include_in_schema=False)
    static = create_static_files_router(path="/static", directories=[STATIC],
                                        include_in_schema=False, name="board-static")
    return [pages, static, feed_handler(stream.SharedScans())]


def _html(body: str, status: int = 200, cookies: list[Cookie] | None = None) -> Response[str]:
    return Response(body, media_type="text/html; charset=utf-8", status_code=status,
                    headers=HEADERS, cookies=cookies)


async def _offload(work: Any) -> Any:
    return await anyio.to_thread.run_sync(work)


# --- pages ---------------------------------------------------------------------------


@get("/", sync_to_thread=True)
def board_page(request: Request[Any, Any, Any], store: StoreDep,
               config: ConfigDep) -> Response[str]:
    """"Needs you" (the visitor's inbox) on top, then one page of runs grouped by state,
    filtered by the URL's `owner`, `state`, `worker`, `q`, paged by `before`."""
    who = board_session.visitor(request, store, config)
    chosen = board_views.filters({k: request.query_params.getall(k, [])
                                  for k in board_views.FILTERS})
    cursor = store.change_cursor()  # before the read: a change in between is sent again
    now = utcnow()
    scoped = who.grant.run_id if who.grant is not None else None
    if scoped:
        listed, more = [store.get(scoped)], False
    else:
        listed = store.runs_page(before=chosen.before or None, limit=PAGE + 1,
                                 states=chosen.states(), owner=chosen.owner or None)
        listed, more = listed[:PAGE], len(listed) > PAGE
    packets = reading.runs(store, _reader(who), _visible(who, listed), config=config.project,
                           now=now)
    groups = board_views.board([p for p in packets if chosen.keeps(p)], now)
    return _html(render("board.html", groups=groups, cursor=cursor, run_id="",
                        visitor=who.label, csrf=who.csrf, error=None,
                        needs=_needs(store, config, who), filters=chosen,
                        states=board_views.STATE_ORDER,
                        older=board_views.older(listed, more, chosen)))


def _needs(store: Store, config: ServerConfig, who: Visitor) -> tuple[board_views.Need, ...]:
    """The visitor's inbox (the API's own use case), each run with an action only where
    the access rules would let this visitor's token answer it."""
    if who.grant is None:
        return ()
    try:
        found = operations.inbox(store, who.grant, ack=False, project=config.project)
    except errors.Refused:
        return ()
    may_act = set()
    for run_id in {i.run_id for i in found.items}:
        try:
            packet = store.get(run_id)
        except errors.NotFound:
            continue
        if _allowed_actions(who, packet) - {"adopt"}:
            may_act.add(run_id)
    return board_views.needs(found.items, who.grant.holder, may_act)


@get("/runs/{run_id:str}", sync_to_thread=True)
def run_page(request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
             run_id: RunId, before: Before = None) -> Response[str]:
    who = board_session.visitor(request, store, config)
    return _html(_run_html(store, config, who, run_id, before=before))


def _run_html(store: Store, config: ServerConfig, who: Visitor, run_id: str,
              error: errors.WaypostError | None = None, before: int | None = None) -> str:
    cursor = store.change_cursor()
    reader = _reader(who)
    stored = reading.readable(store, reader, run_id)
    [packet] = reading.runs(store, reader, [stored], config=config.project)
    now = packet.observed.as_of if packet.observed else utcnow()
    events = reading.events_window(store, reader, run_id, before=before,
                                   limit=board_views.TIMELINE_EVENTS + 1, config=config.project)
    versions = reading.events_window(store, reader, run_id, limit=previews.VERSIONS,
                                     types=("artifact_recorded",), config=config.project)
    page = board_views.run_page(packet, events, now, actions=_allowed_actions(who, packet),
                                downloads=reading.sees_all(reader, stored), before=before,
                                previews=previews.previews(store, reader, packet, versions))
    return render("run.html", page=page, cursor=cursor, run_id=packet.id, visitor=who.label,
                  csrf=who.csrf, error=error_shown(error) if error else None)


@get("/runs/{run_id:str}/artifacts/{name:str}", sync_to_thread=True)
def artifact(request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
             run_id: RunId, name: ArtifactName, inline: Inline = False) -> Response[bytes]:
    """The stored bytes as a download; `inline`: a raster image shown in the page with its
    media type (the page's policy forbids any script). Anything else is never inline."""
    who = board_session.visitor(request, store, config)
    found, data = reading.artifact(store, _reader(who), run_id, name)
    typed = previews.media_type(found)
    if inline and typed in previews.IMAGES:
        return Response(data, media_type=typed, headers={**HEADERS, "Content-Disposition":
                                                         "inline"})
    disposition = (f'attachment; filename="{safe_name(found.name)}"; '
                   f"filename*=UTF-8''{quote(found.name, safe='')}")
    return Response(data, media_type="application/octet-stream",
                    headers={**HEADERS, "Content-Disposition": disposition})


@get("/runs/{run_id:str}/evidence/{evidence_id:str}/log", sync_to_thread=True)
def evidence_log(request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
                 run_id: RunId, evidence_id: EvidenceId) -> Response[str]:
    """An evidence item's full log (its end, bounded) as plain text: every control
    character shown as text (a terminal escape cannot recolour or rewrite it), never HTML."""
    who = board_session.visitor(request, store, config)
    reader = _reader(who)
    data = previews.evidence_log(store, reader, reading.readable(store, reader, run_id),
                                 evidence_id)
    return Response(printable(data.decode("utf-8", errors="replace"), limit=None),
                    media_type="text/plain; charset=utf-8", headers=HEADERS)


def _reader(who: Visitor) -> access.Caller:
    """Who reads, for the read model (`usecases.reading`): the token's grant; the open
    board's anonymous visitor reads as a watcher does (the public view, with liveness)."""
    return who.grant if who.grant is not None else OPEN_BOARD


def _visible(who: Visitor, packets: Iterable[Packet]) -> list[Packet]:
    return list(packets) if who.grant is None else access.visible(who.grant, packets)


def _allowed_actions(who: Visitor, packet: Packet) -> set[str]:
    """The owner actions the access rules let this visitor's token ask for on `packet`
    (none on a run imported from a bundle: nothing writes to it here)."""
    if who.grant is None or (packet.observed is not None and packet.observed.imported):
        return set()
    allowed = set()
    for name, operation in ACTIONS.items():
        try:
            access.check_operation(who.grant, operation, packet)
        except (errors.Refused, errors.NotFound):  # a worker's unblock names its blocker
            continue
        allowed.add(name)
    return allowed


# --- signing in and out ------------------------------------------------------------------


@get("/login", sync_to_thread=False)
def sign_in_form(next_page: NextPage = None) -> Response[str]:
    return _html(render("login.html", cursor="", run_id="", visitor="", csrf="", error=None,
                        next_page=_back_to(next_page)))


@post("/login", status_code=303)
async def sign_in(request: Request[Any, Any, Any], store: StoreDep) -> Response[Any]:
    board_session.check_origin(request)
    form = await request.form()
    secret = str(form.get("token") or "").strip()[:512]
    try:
        await _offload(functools.partial(tokens.authenticate, store, secret))
    except errors.WaypostError as exc:
        return _html(render("login.html", cursor="", run_id="", visitor="", csrf="",
                            error=error_shown(exc), next_page="/"), status=status_of(exc))
    secure = request.url.scheme == "https"
    return Redirect(_back_to(str(form.get("next") or "")), status_code=303,
                    cookies=[board_session.token_cookie(secret, secure=secure)])


@post("/logout", status_code=303)
async def sign_out(request: Request[Any, Any, Any], store: StoreDep) -> Redirect:
    board_session.check_origin(request)
    await _offload(functools.partial(board_links.end_session, request, store))
    return Redirect("/login", status_code=303, cookies=[
        board_session.cleared_cookie(secure=request.url.scheme == "https")])


# --- the owner's actions -----------------------------------------------------------------


@post("/runs/{run_id:str}/{action:str}", status_code=303)
async def act(request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
              run_id: RunId, action: Action) -> Response[Any]:
    """review, approve (with waivers), changes, cancel, adopt (a gate): the same rules and
    use cases as the API's; a refusal shows the run page with the reason."""
    form = await request.form()
    fields: FormData = {key: [str(v) for v in form.getall(key)] for key in form}
    who = await _offload(functools.partial(board_session.visitor, request, store, config))
    board_session.check_post(request, who, _one(fields, board_session.CSRF_FIELD))
    try:
        await _offload(functools.partial(perform, store, config, who, run_id, action, fields))
    except errors.WaypostError as exc:
        body = await _offload(functools.partial(_run_html, store, config, who, run_id, exc))
        return _html(body, status=status_of(exc))
    return Redirect(f"/runs/{quote(run_id, safe='')}", status_code=303)


def perform(store: StoreDep, config: ConfigDep, who: Visitor, run_id: str, action: str,
            fields: FormData) -> None:
    """One owner action as `who`'s token's holder: the API's own operation, so the same
    access rules, the same refusal of gates that would run here, the same use case."""
    operation = ACTIONS.get(action)
    if operation is None:
        raise errors.NotFound(f"the board has no action {action[:40]!r}",
                              hint="review, approve, changes, cancel, adopt, unblock or "
                              "transfer")
    if who.grant is None:
        raise errors.NotAuthorized("the open board is read only", hint="sign in with a token")
    if operation is Operation.REVIEW:
        operations.review(store, who.grant, config, run_id)
    elif operation is Operation.ADOPT_GATE:
        operations.adopt_gate(store, who.grant, run_id,
                              _body({"name": _one(fields, "gate") or ""}, shapes.AdoptBody))
    elif operation is Operation.APPROVE:
        operations.approve(store, who.grant, run_id, _body(
            {"waivers": _waivers(fields), "reviewed": _reviewed(fields)}, shapes.ApproveBody))
    elif operation is Operation.CHANGES:
        operations.changes(store, who.grant, run_id, _body(
            {"reason": _one(fields, "reason") or "", "reviewed": _reviewed(fields)},
            shapes.ChangesBody))
    elif operation is Operation.UNBLOCK:
        operations.unblock(store, who.grant, run_id, _body(
            {"blocker": _one(fields, "blocker") or "",
             "resolution": _one(fields, "resolution") or ""}, shapes.UnblockBody))
    elif operation is Operation.TRANSFER:
        operations.transfer(store, who.grant, run_id, _body(
            {"authority": _one(fields, "authority") or "", "to": _one(fields, "to") or ""},
            shapes.TransferBody))
    else:
        body = _body({"reason": _one(fields, "reason") or ""}, shapes.ReasonBody)
        operations.cancel(store, who.grant, run_id, body)


def _body(fields: dict[str, Any], shape: type[BodyT]) -> BodyT:
    """A form read into the API's own request shape, under the same limits."""
    try:
        return msgspec.convert(fields, shape)
    except msgspec.ValidationError as exc:
        raise errors.InvalidInput(f"the form is not accepted: {exc}",
                                  hint="reload the page and try again") from None


def _one(fields: FormData, key: str) -> str | None:
    values = fields.get(key) or []
    return values[0] if len(values) == 1 else None


def _reviewed(fields: FormData) -> str:
    """The digest of the result the page showed, which its answer forms carry: a form
    without one is refused (by the use case, after the token's and the run's rules), so
    an answer from the board is always bound to what its owner saw."""
    return _one(fields, "reviewed") or ""


def _waivers(fields: FormData) -> dict[str, str]:
    """`gate` and `reason` fields in pairs; a gate left without a reason is not waived."""
    gates, reasons = fields.get("gate", []), fields.get("reason", [])
    if len(gates) != len(reasons) or len(gates) > 100:
        raise errors.InvalidInput("each waived gate needs one reason field",
                                  hint="reload the page and try again")
    return {g: r.strip() for g, r in zip(gates, reasons, strict=True) if r.strip()}


# --- the live feed ----------------------------------------------------------------------


def feed_handler(scans: stream.SharedScans) -> HTTPRouteHandler:
    """`/events`, its streams sharing `scans` (one per server)."""

    @get("/events", media_type="text/event-stream", summary="The board's live feed",
         description="Server-sent events; each `id:` is the store's change cursor: "
         "reconnect with Last-Event-ID to be told of every change since.")
    async def events(request: Request[Any, Any, Any], store: StoreDep, config: ConfigDep,
                     after: After = None) -> ServerSentEvent:
        who = await _offload(functools.partial(board_session.visitor, request, store, config,
                                               page=False))
        last = request.headers.get("last-event-id")
        cursor = await _offload(functools.partial(stream.start_cursor, store, last, after))
        feed = stream.Feed(store=store, visible=functools.partial(_visible, who),
                           still_allowed=functools.partial(_still_allowed, store, who),
                           call=anyio.to_thread.run_sync, sleep=anyio.sleep, scans=scans)
        return ServerSentEvent(stream.messages(feed, cursor))

    return events


def _still_allowed(store: Store, who: Visitor) -> None:
    if who.secret is not None:
        tokens.authenticate(store, who.secret)


# --- errors as pages --------------------------------------------------------------------


def _to_sign_in(request: Request[Any, Any, Any], _: SignIn) -> Response[Any]:
    back = _back_to(request.url.path)
    return Redirect("/login" if back == "/" else f"/login?next={quote(back, safe='/')}",
                    status_code=303)


def _back_to(path: str | None) -> str:
    """Where sign-in returns: one of the board's own pages, else the board."""
    if path and re.fullmatch(r"/runs/[A-Za-z0-9_]{1,64}", path):
        return path
    return "/"


def _error_page(request: Request[Any, Any, Any], exc: errors.WaypostError) -> Response[str]:
    """A refused page, as a page: the status from the one error map (`errors.status_of`)."""
    status = status_of(exc)
    cookies = None
    if status == 401:  # a wrong, expired or revoked token: forget it, offer the form
        cookies = [board_session.cleared_cookie(secure=request.url.scheme == "https")]
        body = render("login.html", cursor="", run_id="", visitor="", csrf="",
                      error=error_shown(exc), next_page=_back_to(request.url.path))
    else:
        body = render("base.html", cursor="", run_id="", visitor="", csrf="",
                      error=error_shown(exc))
    return _html(body, status=status, cookies=cookies)
