"""The one answer to an agent host's hook, which both hook doors give: `waypost hook EVENT
--host HOST` (stdin in, stdout out) and `POST /hooks/claude/{event}` (the body in, the JSON
out). A door reads its input and renders the `HostAnswer`; everything else is decided
here, once: the input, who is calling, the session's run (attached when a parent named
one), the decision (`hooks.decide`), the count and the cap (`hooks.cap`), the host's shape
(`hooks.hosts`).

A hook's own failure is a refusal in the host's shape, never an error: every host lets the
agent stop when a hook fails (a command's exit code but 0 and 2, an HTTP status but 2xx,
no answer), so bad input, a store that cannot be read, a missing or dead token, a run that
cannot be found are answered as a refusal saying what broke. At a session's start or a
prompt (never refused) the same text is told as context.

Who is calling. On the command line (`caller=None`) the store's own trust: the hook may
write what it counts. Over HTTP (`Remote`), the bearer token's holder:

- no token, or one this store never issued: every stop refused, saying how to set a token
  and nothing of any run; counted per session in the server's memory (`MemoryTally`:
  nothing an unauthenticated caller sends is written to the store), past the cap let stop.
- a revoked or expired token: the same, counted per token in the store's settings (one
  setting per token ever issued, durable); past the cap every later stop with that token
  is let go, as it never works again.
- a live token must read the session's run. Its refusals count on the run, and the cap's
  blocker is recorded as its holder, only when it may write the run (a worker's or the
  owner's token); anyone else's are counted in the server's memory per token and session,
  and nothing is written to the run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from waypost.config import Config
from waypost.core import access
from waypost.core.access import Operation
from waypost.durations import utcnow
from waypost.errors import (
    NotAuthorized,
    NotFound,
    Refused,
    RuleViolation,
    Unauthenticated,
    WaypostError,
)
from waypost.events import Claimed
from waypost.hooks import decide, hosts
from waypost.hooks.cap import MemoryTally, SettingsTally, Tally, capped, counted, setting_name
from waypost.hooks.decide import Context, StopDecision
from waypost.hooks.hosts import HookCall
from waypost.model import TERMINAL, Grant, Packet

if TYPE_CHECKING:
    from waypost.store.base import Store

MAX_INPUT: Final = 1 << 20  # bytes of hook JSON taken at most (a host sends a few hundred)
TOKEN_FIX: Final = ("issue one with `waypost token issue --holder NAME --role worker "
                    "--run RUN` and set it in the host's hook config (the hook's headers: "
                    "Authorization: Bearer $WAYPOST_TOKEN)")

Said = StopDecision | Context
StoreSource = Callable[[], "Store | None"]  # the store, or None: there is none here


class Remote(msgspec.Struct, frozen=True, kw_only=True):
    """A caller over HTTP: the bearer token it sent, and the server's memory tally."""

    secret: str | None  # None: no token, or an Authorization header that is not a bearer's
    tally: MemoryTally  # the server's: refusals that may not be written to the store


class Terms(msgspec.Struct, frozen=True, kw_only=True):
    """What the door was told besides the host's JSON (options, environment, the URL)."""

    cap: int = decide.DEFAULT_STOP_CAP  # refused stops in a row, then the agent may stop
    require_run: bool = False  # [hooks] require_run of the store's project (or the server's)
    named_run: str | None = None  # the run a parent started this session for
    named_by: str = "WAYPOST_RUN"  # where the door read `named_run`, for the refusals' words
    reader: str | None = None  # the session's actor (WAYPOST_ACTOR): whose inbox it is told
    # the project's settings, for the `[sanitize]` terms a reader of the public view is shown
    project: Config = msgspec.field(default_factory=Config)


class HostAnswer(msgspec.Struct, frozen=True, kw_only=True):
    said: StopDecision | Context  # what was decided
    out: str  # the host's answer document as a command hook prints it ("": nothing)
    log: str  # a stop let through: its reason, for the host's log ("": nothing)

    def document(self) -> dict[str, Any]:
        """The answer as an HTTP hook's body: the same JSON; a stop let through carries
        its reason as a `systemMessage` (an HTTP hook has no log to write it to)."""
        if self.out:
            found: dict[str, Any] = msgspec.json.decode(self.out)
            return found
        return {"systemMessage": self.log} if self.log else {}


class Stranger(msgspec.Struct, frozen=True, kw_only=True):
    """A remote caller with no live token: why, and the dead token's grant when known."""

    why: str
    dead: Grant | None = None  # a revoked or expired token's


def answer(store: StoreSource, host: str, event: str, read: Callable[[], bytes], *,
           caller: Remote | None, terms: Terms, now: datetime | None = None) -> HostAnswer:
    """The host's answer to one hook call; never raises (a failure is a refusal). `read`
    gives the host's JSON (raising WaypostError when it could not be read whole)."""
    event = event.lower()
    try:
        said = _decide(store, host, event, read, caller, terms, now or utcnow())
    except WaypostError as exc:
        said = failed(event, f"waypost hook failed: {exc}{_next(exc)}")
    except Exception as exc:  # a bug must not let the agent stop unchecked
        said = failed(event, f"waypost hook failed unexpectedly: {type(exc).__name__}: {exc}")
    out, log = hosts.render(host, event, said)
    return HostAnswer(said=said, out=out, log=log)


def failed(event: str, reason: str) -> Said:
    """The hook's own failure: a refusal, or at a session's start or a prompt, context."""
    if event in hosts.CONTEXTS:
        return Context(text=reason)
    return StopDecision(block=True, reason=reason)


def _decide(source: StoreSource, host: str, event: str, read: Callable[[], bytes],
            caller: Remote | None, terms: Terms, now: datetime) -> Said:
    hosts.check_supported(host, event)  # before the input is read: a wrong hook says so
    call = hosts.read_call(host, event, read(), MAX_INPUT)
    store = source()
    if store is None:
        return _without_store(call, terms)
    grant: Grant | None = None
    if caller is not None:
        who = identify(store, caller.secret, now)
        if isinstance(who, Stranger):
            return _stranger(store, call, caller.tally, who, terms)
        grant = who
    tally = caller.tally if caller is not None else None
    if event in hosts.CONTEXTS:
        return _context(store, call, grant, terms, now)
    return _stop(store, call, grant, tally, terms)


def _without_store(call: HookCall, terms: Terms) -> Said:
    if terms.require_run and call.event == "stop":
        return StopDecision(block=True, reason=(
            f"waypost: this project requires a run for every session, and there is no "
            f"waypost store here: waypost init, then {decide.start_command(call.session)}"))
    if call.event in hosts.CONTEXTS:
        return decide.no_run_context(call.session, require_run=terms.require_run)
    if call.event == "subagent-stop":
        return _subagent_free(call)
    return decide.decide_stop(None, call.session, require_run=terms.require_run)


def _subagent_free(call: HookCall) -> StopDecision:
    """A subagent with no run of its own may stop: the requirement is the session's."""
    who = f"subagent {call.agent}" if call.agent else "this subagent (the host named none)"
    return StopDecision(block=False, reason=f"waypost: no run is recorded for {who}; "
                        "nothing to check")


# --- who is calling --------------------------------------------------------------------------


def identify(store: Store, secret: str | None, now: datetime) -> Grant | Stranger:
    """The grant of a live token, else why there is none (the dead token's grant too)."""
    from waypost.usecases import tokens

    if secret is None:
        return Stranger(why="this hook's request carries no waypost token")
    try:
        return tokens.authenticate(store, secret, now=now)
    except Unauthenticated:
        known = (store.token_grant(tokens.digest(secret))
                 if len(secret) <= tokens.MAX_SECRET else None)
    if known is None:
        return Stranger(why="the token this hook sends is not one this store issued")
    state = "was revoked" if known.revoked_at is not None else "has expired"
    return Stranger(why=f"the token for this hook ({known.id}) {state}", dead=known)


def _stranger(store: Store, call: HookCall, memory: Tally, who: Stranger,
              terms: Terms) -> Said:
    """No live token: refused (told, at a start or a prompt) with the fix alone; counted
    per dead token in the store, else per session in memory."""
    if call.event in hosts.CONTEXTS:
        return Context(text=f"waypost hook: {who.why}: {TOKEN_FIX}")
    refused = StopDecision(block=True, reason=(
        f"waypost: {who.why}, so this stop was not checked: {TOKEN_FIX}"))
    for_good = who.dead is not None
    after = " and at every later stop with it" if for_good else ""

    def let_go(blocks: int) -> str:
        return (f"waypost: {who.why}; this hook refused a stop {blocks} times in a row for "
                f"it and lets the agent stop now{after}, unchecked: {TOKEN_FIX}")

    turn = decide.turn_key(call.turn, 0) if call.turn else None
    if who.dead is not None:
        return counted(SettingsTally(store), setting_name("hook.token.", who.dead.id), refused,
                       cap=terms.cap, turn=turn, let_go=let_go, for_good=True)
    return counted(memory, "stranger\x1f" + call.session, refused, cap=terms.cap, turn=turn,
                   let_go=let_go)


def may_write(grant: Grant | None, packet: Packet) -> bool:
    """Whether the caller may record on the run what a hook records (its count, the cap's
    blocker, a session): the command line may; a token as its role may block the run."""
    if grant is None:
        return True
    try:
        access.check_operation(grant, Operation.BLOCK, packet)
    except NotAuthorized:
        return False
    return True


def _check_reads(grant: Grant | None, packet: Packet) -> None:
    """Refuse a token that may not read the run, naming no run (its caller may not know
    which run its session's is)."""
    if grant is None:
        return
    try:
        access.check_operation(grant, Operation.READ, packet)
    except NotAuthorized as exc:
        raise NotAuthorized(f"this hook's token ({grant.holder}'s {grant.role} token"
                            + (f" for run {grant.run_id}" if grant.run_id else "")
                            + ") may not read this session's run",
                            hint="give the hook a token for that run: waypost token issue "
                            "--holder WORKER --role worker --run RUN") from exc


# --- a session's start and a prompt ----------------------------------------------------------


def _context(store: Store, call: HookCall, grant: Grant | None, terms: Terms,
             now: datetime) -> Context:
    said = _run_context(store, call, grant, terms, now)
    if call.event != "session-start":
        return said
    news = _while_away(store, _reader(store, call, grant, terms), grant, terms.project)
    if news is None:
        return said
    return Context(text=f"{said.text}\n\n{news}" if said.text else news)


def _reader(store: Store, call: HookCall, grant: Grant | None, terms: Terms) -> str | None:
    """Whose inbox a new session is told: the token's holder over HTTP; else the session's
    actor; else the owner of the session's run when the session is the owner's own (the
    run has no other worker). None: nobody's."""
    if grant is not None:
        return grant.holder
    if terms.reader:
        return terms.reader
    packet = _session_packet(store, call.session)
    if packet is not None and (packet.worker is None or packet.worker.actor == packet.owner):
        return packet.owner
    return None


def _while_away(store: Store, reader: str | None, grant: Grant | None,
                project: Config) -> str | None:
    """The reader's news not yet shown, marked shown now; a failure to read it is told,
    and never hides the rest of the session's context."""
    if reader is None:
        return None
    from waypost.usecases import inbox

    try:
        return inbox.while_away(store, reader, caller=grant, config=project)
    except WaypostError as exc:
        return f"waypost: the inbox of {reader[:80]} could not be read: {exc}"


def _run_context(store: Store, call: HookCall, grant: Grant | None, terms: Terms,
                 now: datetime) -> Context:
    packet = _session_packet(store, call.session)
    if packet is None and call.event == "session-start" and terms.named_run:
        packet = _attach(store, call.session, terms, grant)
    if packet is None:
        return decide.no_run_context(call.session, require_run=terms.require_run)
    _check_reads(grant, packet)
    if call.event == "session-start" and packet.state not in TERMINAL and packet.worker:
        from waypost.usecases.handoff import brief, brief_text

        return Context(text=brief_text(brief(packet, store.events(packet.id)), now))
    return Context(text=decide.status_line(packet, _addressee(store, packet, call, grant,
                                                                terms)))


def _session_packet(store: Store, session: str | None) -> Packet | None:
    run_id = store.session_run(session) if session else None
    return store.get(run_id) if run_id else None


def _named(store: Store, terms: Terms, grant: Grant | None) -> Packet:
    """The run a parent started this session for (`terms.named_run`), if the caller may
    read it; a run imported from a bundle is no session's (RuleViolation: read-only)."""
    named = (terms.named_run or "")[:200]
    try:
        snap = store.load(named)
    except NotFound as exc:
        raise NotFound(f"{terms.named_by}={named[:80]!r} names no run in this store",
                       hint=f"start it first, or take {terms.named_by} out") from exc
    _check_reads(grant, snap.packet)
    if snap.origin is not None:
        from waypost.core.history import read_only

        raise read_only(snap.packet.id, snap.origin)
    return snap.packet


def _attach(store: Store, session: str, terms: Terms, grant: Grant | None) -> Packet:
    """At a session's start, the named run becomes the session's, so its stop hook holds
    it to that run from the first stop; a finished run is refused."""
    packet = _named(store, terms, grant)
    if packet.state in TERMINAL:
        raise Refused(f"{terms.named_by} names run {packet.id}, which is {packet.state}: "
                      "this session is not attached to it", hint="start a new run for this work")
    if grant is not None:  # a session becomes the run's by one who may write the run
        access.check_operation(grant, Operation.BLOCK, packet)
    store.attach_session(packet.id, session)
    return packet


# --- a stop ------------------------------------------------------------------------------------


def _stop(store: Store, call: HookCall, grant: Grant | None, memory: Tally | None,
          terms: Terms) -> StopDecision:
    """A subagent's stop by its own run (the one started with the agent's id as
    --session), a session's by the session's, else by the run a parent named for it (read
    only: a session is attached at its start, so two sessions never take a run in turns)."""
    if call.event == "subagent-stop":
        packet = _session_packet(store, call.agent)
        if packet is None:
            return _subagent_free(call)
        return _run_stop(store, call, packet, grant, memory, terms)
    packet = _session_packet(store, call.session)
    if packet is None and terms.named_run:
        try:
            packet = _named(store, terms, grant)
        except (NotFound, NotAuthorized, RuleViolation) as exc:
            refused = StopDecision(block=True, reason=f"waypost: {exc.message}{_next(exc)}")
            return _count_without_run(store, call, grant, memory, refused, terms)
    if packet is not None:
        return _run_stop(store, call, packet, grant, memory, terms)
    refused = decide.decide_stop(None, call.session, require_run=terms.require_run)
    if not refused.block:
        return refused
    return _count_without_run(store, call, grant, memory, refused, terms)


def _run_stop(store: Store, call: HookCall, packet: Packet, grant: Grant | None,
              memory: Tally | None, terms: Terms) -> StopDecision:
    turn = decide.turn_key(call.turn, packet.version) if call.turn else None
    if grant is None or may_write(grant, packet):  # who may write the run may read it
        return capped(store, packet, decision_of(store, packet, call, grant, terms), cap=terms.cap,
                      turn=turn,
                      actor=grant.holder if grant is not None else None)
    assert memory is not None  # a grant comes with a remote caller's tally
    try:
        _check_reads(grant, packet)
    except NotAuthorized as exc:  # counted all the same: such a token never gets further
        refused = StopDecision(block=True, reason=f"waypost: {exc.message}{_next(exc)}")
        return _count_for_reader(memory, call, grant, refused, None, terms.cap, turn)
    return _count_for_reader(memory, call, grant, decision_of(store, packet, call, grant, terms),
                             packet.id, terms.cap, turn)


def decision_of(store: Store, packet: Packet, call: HookCall, grant: Grant | None = None,
                terms: Terms | None = None) -> StopDecision:
    return decide.decide_stop(packet, call.session,
                              to=_addressee(store, packet, call, grant, terms))


def _addressee(store: Store, packet: Packet, call: HookCall, grant: Grant | None,
               terms: Terms | None) -> decide.Addressee:
    """Whom the session's instructions are for: its run's session is the run's worker's,
    unless the session acts as someone else (a token's holder, `WAYPOST_ACTOR`), or the
    lease changed hands between actors since (read from the run's claims, only when the
    lease was claimed more than once). A subagent's run is its own, with its own lease."""
    reader = grant.holder if grant is not None else (terms.reader if terms else None)
    if call.event == "subagent-stop" and grant is None:
        reader = None  # the session's actor is the parent's; a subagent's run is its own
    lease = packet.worker
    changed = (reader is None and lease is not None and lease.epoch > 1
               and any(isinstance(e.data, Claimed) and e.data.took_over_from
                       for e in store.events(packet.id)))
    return decide.addressee(packet, reader, changed_hands=changed)


def _count_for_reader(memory: Tally, call: HookCall, grant: Grant, decision: StopDecision,
                      run_id: str | None, cap: int, turn: str | None) -> StopDecision:
    """A token that may not write the run (or read it): its refusals counted in the
    server's memory per token and session, never on the run; past the cap let stop."""
    key = f"reader\x1f{grant.id}\x1f{call.session}"
    if not decision.block:
        memory.clear(key)
        return decision

    def let_go(blocks: int) -> str:
        return (f"waypost: this session's stop was refused {blocks} times in a row, and the "
                f"hook's token ({grant.holder}'s {grant.role} token) may not record that on "
                f"the session's run, so the agent may stop: nothing was recorded. Give the "
                f"hook a token that may: waypost token issue --holder WORKER --role worker "
                f"--run {run_id or 'RUN'}")

    return counted(memory, key, decision, cap=cap, turn=turn, let_go=let_go)


def _count_without_run(store: Store, call: HookCall, grant: Grant | None,
                       memory: Tally | None, refused: StopDecision,
                       terms: Terms) -> StopDecision:
    """A session refused for having no run it may use (`[hooks] require_run`, or a named
    run that cannot be found): its refusals counted in a store setting on the command
    line (there is no run to count them on), in the server's memory for a remote caller
    (who writes nothing for a session it names), and past the cap let stop, saying so."""
    tally: Tally
    if grant is None or memory is None:
        tally, key = SettingsTally(store), decide.no_run_count_setting(call.session)
    else:
        tally, key = memory, "norun\x1f" + call.session

    def let_go(blocks: int) -> str:
        return (f"waypost: session {call.session} was refused a stop {blocks} times in a row "
                f"for having no run and is let stop, with no run to record it on. Start one "
                f"before the next session: {decide.start_command(call.session)}")

    turn = decide.turn_key(call.turn, 0) if call.turn else None
    return counted(tally, key, refused, cap=terms.cap, turn=turn, let_go=let_go)


def _next(exc: WaypostError) -> str:
    """The refusal's hint, its steps as the `waypost` commands the agent's shell runs."""
    from waypost.usecases.commands import command  # only on a refusal

    hint = exc.hint_with(command)
    return f" (next: {hint})" if hint else ""
