"""Built-in checks, usable as evidence (`waypost evidence check RUN CHECK`) and as gates.

    artifact:NAME          stored, hash intact, unchanged on disk, substantive content
    grep:PATTERN:PATH      the regex matches a line of PATH (a file, directory or artifact)
    grep!:PATTERN:PATH     the regex matches no line of PATH
    no-private[:A,B]       the sanitizer finds nothing in the artifacts and public summary
    http:URL [TEXT]        GET answers 2xx (and its body contains TEXT)
    command:CMD            CMD (split like a shell would, run without one) exits 0

Every check is bounded: patterns are RE2 (linear time; no backreferences or lookaround);
grep reads only regular files up to [limits] max_artifact_bytes and follows no links inside
a folder; `http:` ends within HTTP_TIMEOUT, body included; `command:` runs under
[limits] evidence_timeout and max_output_bytes (`waypost.system.process`).

Each check returns a `CheckResult` (verdict + summary that says why); `Run.check` records it.
"""

from __future__ import annotations

import enum
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, cast

import msgspec

from waypost.config import Config
from waypost.errors import InvalidInput, NotFound
from waypost.model import Artifact, EvidenceKind, Packet, Verdict
from waypost.store.base import Store
from waypost.usecases.evidence import CheckResult, command_summary, run_command, tail
from waypost.usecases.substance import changed_on_disk, stored_bytes, substance_problem

if TYPE_CHECKING:
    import httpx


class CheckKind(enum.StrEnum):
    ARTIFACT = "artifact"  # a stored artifact: present, hash intact, substantive
    GREP = "grep"  # a pattern is present in a file, directory or artifact
    GREP_ABSENT = "grep!"  # a pattern is absent from a file, directory or artifact
    NO_PRIVATE = "no-private"  # the sanitizer finds nothing private
    HTTP = "http"  # a live URL answers 2xx (and shows the expected text)
    COMMAND = "command"  # a command exits 0


EVIDENCE_KIND: Final = {
    CheckKind.ARTIFACT: EvidenceKind.INSPECT, CheckKind.GREP: EvidenceKind.GREP,
    CheckKind.GREP_ABSENT: EvidenceKind.GREP, CheckKind.NO_PRIVATE: EvidenceKind.INSPECT,
    CheckKind.HTTP: EvidenceKind.LIVE_CHECK, CheckKind.COMMAND: EvidenceKind.COMMAND,
}
USAGE: Final = ("artifact:NAME, grep:PATTERN:PATH, grep!:PATTERN:PATH, no-private[:NAMES], "
                "http:URL [TEXT], command:CMD")
HTTP_TIMEOUT: Final = 30.0  # the whole request, body included
HTTP_READ_LIMIT: Final = 1024 * 1024


class Check(msgspec.Struct, frozen=True, kw_only=True):
    spec: str  # as written, e.g. "grep!:TODO:report.md"
    kind: CheckKind
    arg: str = ""


@dataclass(frozen=True, kw_only=True)
class Context:
    """Where a check runs: against this packet and store, in `cwd`, under `config`; with
    `files` False (a remote caller's, see `core.exposure`) it looks at no file of this
    machine's, not even the one an artifact was recorded from."""

    store: Store
    packet: Packet
    config: Config
    cwd: str | None = None
    files: bool = True

    def path(self, name: str) -> Path:
        return Path(self.cwd or ".") / name

    def changed(self, artifact: Artifact) -> str | None:
        """How the file `artifact` was recorded from differs now (None: it does not, or
        it is not looked at)."""
        return changed_on_disk(artifact, self.cwd) if self.files else None


def parse_check(spec: str) -> Check:
    """`KIND:ARG`; refuses unknown kinds, missing arguments and bad patterns."""
    head, _, arg = spec.strip().partition(":")
    kinds = {k.value: k for k in CheckKind}
    if head not in kinds or (not arg.strip() and head != CheckKind.NO_PRIVATE):
        raise InvalidInput(f"bad check {spec!r}", hint=f"write one of: {USAGE}")
    check = Check(spec=spec.strip(), kind=kinds[head], arg=arg.strip())
    if check.kind in (CheckKind.GREP, CheckKind.GREP_ABSENT):
        _grep_parts(check)
    if check.kind is CheckKind.HTTP and not check.arg.startswith(("http://", "https://")):
        raise InvalidInput(f"bad check {spec!r}: http: needs an http(s) URL",
                           hint="e.g. http:https://example.org/health ok")
    return check


def run_check(check: Check, ctx: Context) -> CheckResult:
    runner = {CheckKind.ARTIFACT: _artifact, CheckKind.GREP: _grep,
              CheckKind.GREP_ABSENT: _grep, CheckKind.NO_PRIVATE: _no_private,
              CheckKind.HTTP: _http, CheckKind.COMMAND: _command}[check.kind]
    return runner(check, ctx)


def check_result(check: Check, passed: bool, summary: str, **extra: object) -> CheckResult:
    return msgspec.structs.replace(
        CheckResult(kind=EVIDENCE_KIND[check.kind], command=check.spec, summary=summary,
                verdict=Verdict.PASSED if passed else Verdict.FAILED), **extra)


# --- artifact: stored, intact, unchanged, substantive -----------------------------------------


def _artifact(check: Check, ctx: Context) -> CheckResult:
    artifact = ctx.packet.artifact(check.arg)
    if artifact is None:
        names = ", ".join(a.name for a in ctx.packet.artifacts) or "none"
        return check_result(check, False,
                            f"no artifact {check.arg!r} was recorded (recorded: {names})")
    data, problem = stored_bytes(ctx.store, artifact)
    problem = problem or ctx.changed(artifact)
    if data is not None and problem is None:
        problem = substance_problem(artifact.name, data, min_bytes=ctx.config.min_artifact_bytes,
                                    min_words=ctx.config.min_artifact_words)
    if problem is not None or data is None:
        return check_result(check, False, problem or "", artifacts=(artifact.name,))
    return check_result(check, True, f"{artifact.name}: {len(data)} B stored, sha256 "
                   f"{(artifact.sha256 or '')[:12]}… verified, substantive",
                   artifacts=(artifact.name,))


def hashes_result(ctx: Context) -> CheckResult | None:
    """The review's built-in re-verification of every stored artifact (None: there are none)."""
    stored = [a for a in ctx.packet.artifacts if a.stored]
    if not stored:
        return None
    problems = [p for a in stored
                for p in (stored_bytes(ctx.store, a)[1] or ctx.changed(a),) if p]
    check = Check(spec="artifact hashes", kind=CheckKind.ARTIFACT)
    names = tuple(a.name for a in stored)
    if problems:
        return check_result(check, False, "; ".join(problems), artifacts=names)
    return check_result(check, True, f"{len(stored)} stored artifact(s) re-verified: sha256 intact "
                   "and unchanged on disk", artifacts=names)


# --- grep ---------------------------------------------------------------------------------


class Pattern(Protocol):
    """A compiled user pattern (RE2: matching takes time linear in the text, always)."""

    pattern: str

    def search(self, text: str) -> object | None: ...


def compile_pattern(pattern: str) -> Pattern:
    """A user's regex, compiled by RE2: Python's `re` backtracks, so `^(a+)+$` on a line of
    40 characters could run for hours, and no thread can be interrupted to stop it."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the refusal below says it; RE2 would print to stderr too
    try:
        return cast(Pattern, re2.compile(pattern, options))
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args else "invalid"
        raise InvalidInput(f"bad pattern {pattern!r}: {why}",
                           hint="patterns use RE2 syntax (no backreferences or lookaround)"
                           ) from exc


def _grep_parts(check: Check) -> tuple[Pattern, str]:
    pattern, sep, where = check.arg.rpartition(":")
    if not sep or not pattern or not where:
        raise InvalidInput(f"bad check {check.spec!r}: write {check.kind}:PATTERN:PATH")
    return compile_pattern(pattern), where


def _grep_sources(where: str, ctx: Context) -> Iterator[tuple[str, bytes]]:
    """An artifact of that name (its stored copy), else the file or directory on disk."""
    from waypost.usecases.scanning import read_files

    artifact = ctx.packet.artifact(where)
    if artifact is not None and artifact.stored:
        data, problem = stored_bytes(ctx.store, artifact)
        if data is None:
            raise NotFound(problem or where)
        yield f"artifact {where}", data
        return
    root = ctx.path(where)
    if not root.exists():
        raise NotFound(f"no artifact, file or directory named {where}")
    for path, data in read_files([str(root)], limit=ctx.config.max_artifact_bytes):
        yield str(path.relative_to(ctx.cwd) if ctx.cwd else path), data


def _grep(check: Check, ctx: Context) -> CheckResult:
    regex, where = _grep_parts(check)
    try:
        hits = [f"{source}:{number}" for source, data in _grep_sources(where, ctx)
                for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
                if regex.search(line)]
    except (NotFound, InvalidInput) as exc:  # missing, not a regular file, too large
        return check_result(check, False, exc.message)
    shown = ", ".join(hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
    if check.kind is CheckKind.GREP:
        return check_result(check, bool(hits), f"/{regex.pattern}/ found at {shown}" if hits
                       else f"/{regex.pattern}/ not found in {where}")
    return check_result(check, not hits, f"/{regex.pattern}/ found at {shown}" if hits
                   else f"/{regex.pattern}/ absent from {where}")


# --- no-private -----------------------------------------------------------------------------


def _no_private(check: Check, ctx: Context) -> CheckResult:
    from waypost.core.sanitize import find, scan_bytes

    packet, config = ctx.packet, ctx.config
    names = [n.strip() for n in check.arg.split(",") if n.strip()]
    if not names:
        names = list(packet.result.artifacts) if packet.result and packet.result.artifacts \
            else [a.name for a in packet.artifacts if a.stored]
    findings = []
    for name in names:
        artifact = packet.artifact(name)
        if artifact is None:
            return check_result(check, False, f"no artifact {name!r} was recorded")
        data, problem = stored_bytes(ctx.store, artifact)
        if data is None:
            return check_result(check, False, problem or name)
        findings += scan_bytes(data, name, deny=config.deny, allow=config.allow)
    public = packet.result.public_summary if packet.result else None
    if public:
        findings += find(public, deny=config.deny, allow=config.allow, file="public summary")
    scope = f"{len(names)} artifact(s)" + (" and the public summary" if public else "")
    if not findings:
        return check_result(check, True, f"nothing private in {scope}", artifacts=tuple(names))
    listed = ", ".join(f"{f.kind} in {f.file}:{f.line}" for f in findings[:8])
    more = f" and {len(findings) - 8} more" if len(findings) > 8 else ""
    return check_result(check, False, f"{len(findings)} private identifier(s) in {scope}: "
                   f"{listed}{more}", artifacts=tuple(names))


# --- http ---------------------------------------------------------------------------------


def _http(check: Check, ctx: Context) -> CheckResult:
    import httpx

    from waypost.system.web import deadline_client

    url, _, expect = check.arg.partition(" ")
    expect = expect.strip()
    began = time.monotonic()
    try:
        with deadline_client(url, HTTP_TIMEOUT, follow_redirects=True) as client, \
                client.stream("GET", url, headers={"User-Agent": "waypost-check"}) as response:
            status, body = response.status_code, _body(response, HTTP_READ_LIMIT)
    except httpx.TimeoutException:
        return check_result(check, False, f"GET {url} failed: no complete answer within "
                            f"{HTTP_TIMEOUT:g}s", duration_s=round(time.monotonic() - began, 3))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return check_result(check, False, f"GET {url} failed: {exc or type(exc).__name__}",
                            duration_s=round(time.monotonic() - began, 3))
    elapsed = round(time.monotonic() - began, 3)
    seen = expect in body.decode("utf-8", "replace") if expect else True
    summary = f"GET {url} → {status} in {elapsed:.2f}s"
    if expect:
        summary += f", {'found' if seen else 'did not find'} {expect!r}"
    return check_result(check, 200 <= status < 300 and seen, summary, duration_s=elapsed,
                   output_tail=tail(body, ctx.config.output_tail_bytes),
                   log_sha256=ctx.store.put_blob(body))


def _body(response: httpx.Response, limit: int) -> bytes:
    """The first `limit` bytes of the body (the rest is not read)."""
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk[: limit - len(data)]
        if len(data) >= limit:
            break
    return bytes(data)


# --- command --------------------------------------------------------------------------------


def _command(check: Check, ctx: Context) -> CheckResult:
    try:
        argv = shlex.split(check.arg)
    except ValueError as exc:
        return check_result(check, False, f"cannot parse the command {check.arg!r}: {exc}")
    ran = run_command(argv, cwd=ctx.cwd, timeout=ctx.config.evidence_timeout,
                      max_output=ctx.config.max_output_bytes)
    summary = command_summary(check.arg, ran, ctx.config.evidence_timeout)
    return check_result(check, ran.exit_code == 0, summary, command=check.arg, cwd=ctx.cwd,
                        exit_code=ran.exit_code, duration_s=round(ran.duration_s, 3),
                        output_tail=tail(ran.output, ctx.config.output_tail_bytes),
                        log_sha256=ctx.store.put_blob(ran.output))
