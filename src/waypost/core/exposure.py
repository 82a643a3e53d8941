"""What a remote caller may make this server run, read or reach: one policy, asked by every
door that faces the network (the HTTP API and MCP over HTTP) with the same request, before
it calls the use case. A door on the caller's own machine (the CLI, the SDK, MCP over
stdio) holds `LOCAL`, which allows everything: its caller runs there already.

Facing the network, nothing runs on the server because a remote caller asked (a command,
an `http:` check, a check that reads the server's files, an `exec:` target) unless the
server was started with --allow-exec, and a URL a caller registers (a target, a notify
target, an `http:` check or gate) reaches only a host the outbound allow-list names
(--allow-host), with or without --allow-exec. Pure: the packet and the strings decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from waypost.core.gates import runs_at_review
from waypost.errors import NotAuthorized, Refused, step
from waypost.model import Gate, Packet

RUNS_HERE: Final = ("command", "http")  # check kinds that run or reach out from the server
URL_SCHEMES: Final = ("http://", "https://")


class Exposure(msgspec.Struct, frozen=True, kw_only=True):
    """What the callers of one server may make it do."""

    remote: bool = False  # the callers are elsewhere (False: on this machine, all allowed)
    allow_exec: bool = False  # run commands, read the server's files, reach http: checks
    outbound: tuple[str, ...] = ()  # hosts the URLs a remote caller registers may reach

    @property
    def reads_files(self) -> bool:
        """Whether a check or a review may look at this server's files (an artifact's
        recorded path, compared with its stored copy)."""
        return not self.remote or self.allow_exec

    def check_start(self, *, target: str | None, notify: str | None,
                    gates: Iterable[Gate] = ()) -> None:
        """A new run's target, notify target and gates (parsed: a gate's name may hold any
        character): a command: gate is only recorded (it runs where the owner reviews)."""
        self.check_targets(target=target, notify=notify)
        for gate in gates:
            self.check_gate(gate.name, gate.check)

    def check_gate(self, name: str, check: str) -> None:
        """A gate declared now (at start, or added later): an http: check reaches only a
        listed host; a command is recorded, never run here (the owner's review runs it)."""
        kind, arg = _kind_and_arg(check)
        if self.remote and kind == "http":
            check_outbound(_url_of(arg), f"gate {name}={check[:80]!r}", self.outbound)

    def check_targets(self, *, target: str | None, notify: str | None) -> None:
        """A target or notify URI (at start or retarget): an http(s) URL reaches only a
        listed host; an exec: target runs only with --allow-exec."""
        if not self.remote:
            return
        for field, uri in (("target", target), ("notify", notify)):
            if uri is not None and uri.startswith("exec:") and not self.allow_exec:
                raise exec_refusal(f"the {field} {uri[:80]!r} would run a command on the relay")
            if uri is not None and uri.startswith(URL_SCHEMES):
                check_outbound(uri, field, self.outbound)

    def check_command(self, command: str) -> None:
        """A command the caller asks this server to run now (evidence run)."""
        if self.remote and not self.allow_exec:
            raise exec_refusal(f"{command[:80]!r} would run on this server")

    def check_source(self, source: str, *, run: str, name: str) -> None:
        """A file of this server's the caller asks to record as `name` (a URL is only
        referenced): the next step sends its bytes instead."""
        if self.remote and not self.allow_exec and not source.startswith(URL_SCHEMES):
            refused = exec_refusal(f"recording {source[:80]!r} would read it from this "
                                   "server's files")
            raise Refused(refused.message, steps=[step(
                "artifact", run, name=name, why="send its bytes instead")])

    def check_check(self, spec: str, packet: Packet) -> None:
        """A check run now (evidence) or at review (a gate): artifact, no-private and grep
        over stored artifacts always run; a command, an http: check or a grep of a path
        only with --allow-exec, and an http: check reaches only a listed host."""
        if not self.remote:
            return
        kind, arg = _kind_and_arg(spec)
        if self.allow_exec:
            if kind == "http":
                check_outbound(_url_of(arg), f"check {spec[:80]!r}", self.outbound)
            return
        if kind in RUNS_HERE:
            raise exec_refusal(f"the {kind}: check {spec[:80]!r} would run on this server")
        if kind in ("grep", "grep!"):
            where = arg.rpartition(":")[2].strip()
            artifact = packet.artifact(where)
            if artifact is None or not artifact.stored:
                raise exec_refusal(f"the check {spec[:80]!r} would read {where!r} from this "
                                   "server's files (no stored artifact has that name)")

    def check_review(self, packet: Packet) -> None:
        """A review runs every gate that is the owner's (or reads only the store): refused
        when any of those would be (`check_check`). A gate awaiting the owner's adoption
        runs nothing at review (`core.gates.runs_at_review`)."""
        for gate in packet.gates:
            if runs_at_review(packet, gate):
                self.check_check(gate.check, packet)


LOCAL: Final = Exposure()


def facing_network(*, allow_exec: bool, outbound: Iterable[str]) -> Exposure:
    return Exposure(remote=True, allow_exec=allow_exec, outbound=tuple(outbound))


def exec_refusal(what: str) -> Refused:
    return Refused(
        f"{what}: nothing runs on this server because a remote caller asked",
        hint="run it where it may run (waypost review / waypost evidence run on your own "
        "machine), or start the server with --allow-exec")


def _kind_and_arg(spec: str) -> tuple[str, str]:
    kind, _, arg = spec.strip().partition(":")
    return kind.strip(), arg


def _url_of(arg: str) -> str:
    return arg.strip().partition(" ")[0]


def url_host(url: str) -> str:
    """The host of an http(s) URL, lower-cased, without port or IPv6 brackets; "" (no host
    that can be allowed) when the authority holds a user part or a character that parsers
    read differently (`@`, a backslash, a percent escape, a space or a control)."""
    authority = url.partition("://")[2]
    for end in "/?#":
        authority = authority.partition(end)[0]
    if any(c in authority for c in "@\\%") or not authority.isprintable() or " " in authority:
        return ""
    if authority.startswith("["):  # an IPv6 literal, closed, then at most a port
        inside, closed, rest = authority[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")) or not inside or \
                any(c not in "0123456789abcdefABCDEF:." for c in inside):
            return ""
        return inside.lower()
    host = authority.partition(":")[0].lower()
    return "" if "[" in host or "]" in host else host


def check_outbound(url: str, field: str, outbound: Iterable[str]) -> None:
    host = url_host(url)
    allowed = {h.strip().lower().strip("[]") for h in outbound}
    if not host or host not in allowed:
        raise NotAuthorized(
            f"the {field} {url[:80]!r} reaches {host or 'no host'!r}, which this server's "
            "outbound allow-list does not name",
            hint="use a listed host, or start the server with --allow-host HOST")
