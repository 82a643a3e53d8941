"""Built-in checks, usable as evidence (`waypost evidence check RUN CHECK`) and as gates.

    artifact:NAME          stored, hash intact, unchanged on disk, substantive content
    grep:PATTERN:PATH      the regex matches a line of PATH (a file, directory or artifact)
    grep!:PATTERN:PATH     the regex matches no line of PATH
    no-private[:A,B]       the sanitizer finds nothing in the artifacts and public summary
    http:URL [TEXT]        GET answers 2xx (and its body contains TEXT)
    command:CMD            CMD (split like a shell would, run without one) exits 0

Each check returns an `Outcome` (verdict + summary that says why); `record_check` records it.
"""

from __future__ import annotations

import enum
import hashlib
import re
import shlex
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

import msgspec

from waypost.config import Config
from waypost.core.machine import next_evidence_id
from waypost.errors import InvalidInput, NotFound, RuleViolation
from waypost.events import EvidenceRecorded
from waypost.evidence import run_command, tail
from waypost.model import Artifact, Assurance, Evidence, EvidenceKind, Packet, Verdict
from waypost.runs import Run
from waypost.store.base import Store


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
HTTP_TIMEOUT: Final = 30.0
HTTP_READ_LIMIT: Final = 1024 * 1024


class Check(msgspec.Struct, frozen=True, kw_only=True):
    spec: str  # as written, e.g. "grep!:TODO:report.md"
    kind: CheckKind
    arg: str = ""


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a check found, ready to become evidence."""

    kind: EvidenceKind
    verdict: Verdict
    summary: str
    command: str
    cwd: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    output_tail: str | None = None
    log_sha256: str | None = None
    artifacts: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Context:
    """Where a check runs: against this packet and store, in `cwd`, under `config`."""

    store: Store
    packet: Packet
    config: Config
    cwd: str | None = None

    def path(self, name: str) -> Path:
        return Path(self.cwd or ".") / name


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


def run_check(check: Check, ctx: Context) -> Outcome:
    runner = {CheckKind.ARTIFACT: _artifact, CheckKind.GREP: _grep,
              CheckKind.GREP_ABSENT: _grep, CheckKind.NO_PRIVATE: _no_private,
              CheckKind.HTTP: _http, CheckKind.COMMAND: _command}[check.kind]
    return runner(check, ctx)


def outcome(check: Check, passed: bool, summary: str, **extra: object) -> Outcome:
    return msgspec.structs.replace(
        Outcome(kind=EVIDENCE_KIND[check.kind], command=check.spec, summary=summary,
                verdict=Verdict.PASSED if passed else Verdict.FAILED), **extra)


def to_evidence(found: Outcome, *, id: str, assurance: Assurance, at: datetime, by: str,
                gate: str | None = None, review: str | None = None) -> Evidence:
    return Evidence(id=id, kind=found.kind, verdict=found.verdict, assurance=assurance,
                    summary=found.summary, command=found.command, cwd=found.cwd,
                    exit_code=found.exit_code, duration_s=found.duration_s,
                    output_tail=found.output_tail, log_sha256=found.log_sha256,
                    artifacts=found.artifacts, gate=gate, review=review, recorded_at=at,
                    recorded_by=by)


def record_check(run: Run, spec: str, *, config: Config, cwd: str | None = None) -> Packet:
    """Run a built-in check now and record it (assurance `recorded`: waypost ran it)."""
    check = parse_check(spec)
    found = run_check(check, Context(store=run.store, packet=run.packet, config=config, cwd=cwd))
    return run.write(lambda p: EvidenceRecorded(evidence=to_evidence(
        found, id=next_evidence_id(p), assurance=Assurance.RECORDED, at=run.clock(),
        by=run.actor)))


# --- artifact: stored, intact, unchanged, substantive -----------------------------------------

MARKERS: Final = ("todo", "tbd", "tba", "tbc", "fixme", "xxx", "wip", "placeholder")
_MARKER_LINE = re.compile(r"^\s*(?:(?:[#>*+-]+|\d+[.)])\s*)*(?:\[[ xX]?\]\s*)?"
                          r"(?P<marker>" + "|".join(MARKERS) + r")\b", re.IGNORECASE)
_TEMPLATE = re.compile(r"lorem ipsum|\b(?:content|text|description|summary|details?) goes here"
                       r"|\b(?:insert|add|put|your) (?:\w+ )?(?:text|content) here"
                       r"|\bcoming soon\b", re.IGNORECASE)
_WORD = re.compile(r"\w*[^\W\d_]\w*")


def _words(text: str) -> tuple[list[str], list[str]]:
    """(substantive words, placeholder markers): a line that starts with a marker is a note."""
    words: list[str] = []
    markers: list[str] = []
    for line in text.splitlines():
        marker = _MARKER_LINE.match(line)
        if marker:
            markers.append(marker.group("marker").upper())
            continue
        for word in _WORD.findall(line):
            if word.lower() in MARKERS:
                markers.append(word.upper())
            else:
                words.append(word)
    return words, list(dict.fromkeys(markers))


def substance_problem(name: str, data: bytes, *, min_bytes: int, min_words: int) -> str | None:
    """Why `data` is not substantive content, or None when it is."""
    from waypost.sanitize import text_of

    if not data:
        return f"{name} is empty (0 bytes)"
    text = text_of(data)
    if text is not None:
        problem = _text_problem(name, text, min_words)
        if problem:
            return problem
    if len(data) < min_bytes:
        return (f"{name} is only {len(data)} bytes (at least {min_bytes} expected; "
                f"[limits] min_artifact_bytes)")
    return None


def _text_problem(name: str, text: str, min_words: int) -> str | None:
    if not text.strip():
        return f"{name} is only whitespace"
    if name.lower().endswith(".json"):
        return _json_problem(name, text)
    template = _TEMPLATE.search(text)
    if template:
        return f'{name} holds placeholder text ("{template.group(0)}")'
    words, markers = _words(text)
    if markers and len(words) < min_words:
        rest = f" besides {len(words)} other word(s)" if words else ""
        return f"{name} says only {', '.join(markers)}{rest}"
    if len(words) < min_words:
        return (f"{name} has only {len(words)} word(s) (at least {min_words} expected; "
                f"[limits] min_artifact_words)")
    return None


def _json_problem(name: str, text: str) -> str | None:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if value in (None, "", [], {}):
        return f"{name} holds only an empty JSON value ({text.strip()[:20]})"
    return None


def stored_bytes(store: Store, artifact: Artifact) -> tuple[bytes | None, str | None]:
    """(the stored copy, None) when it is there and intact, else (None, why not)."""
    if not artifact.stored or artifact.sha256 is None:
        return None, (f"{artifact.name} is a reference ({artifact.url or artifact.path}), "
                      "not a stored copy: its content cannot be verified")
    try:
        data = store.get_blob(artifact.sha256)
    except NotFound:
        return None, f"the stored copy of {artifact.name} is missing from the store"
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        return None, f"the stored copy of {artifact.name} does not match its sha256 (hash mismatch)"
    return data, None


def changed_on_disk(artifact: Artifact, ctx: Context) -> str | None:
    """The file it was recorded from, if still there, must still hold the recorded bytes."""
    if not artifact.path or artifact.sha256 is None or not ctx.path(artifact.path).is_file():
        return None
    with open(ctx.path(artifact.path), "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest == artifact.sha256:
        return None
    return (f"{artifact.name} changed after it was recorded (hash mismatch: {artifact.path} is "
            f"now sha256 {digest[:12]}…, the recorded copy {artifact.sha256[:12]}…)")


def _artifact(check: Check, ctx: Context) -> Outcome:
    artifact = ctx.packet.artifact(check.arg)
    if artifact is None:
        names = ", ".join(a.name for a in ctx.packet.artifacts) or "none"
        return outcome(check, False, f"no artifact {check.arg!r} was recorded (recorded: {names})")
    data, problem = stored_bytes(ctx.store, artifact)
    problem = problem or changed_on_disk(artifact, ctx)
    if data is not None and problem is None:
        problem = substance_problem(artifact.name, data, min_bytes=ctx.config.min_artifact_bytes,
                                    min_words=ctx.config.min_artifact_words)
    if problem is not None or data is None:
        return outcome(check, False, problem or "", artifacts=(artifact.name,))
    return outcome(check, True, f"{artifact.name}: {len(data)} B stored, sha256 "
                   f"{(artifact.sha256 or '')[:12]}… verified, substantive",
                   artifacts=(artifact.name,))


def require_substantive(store: Store, packet: Packet, names: Sequence[str],
                        config: Config) -> None:
    """Refuse (before any event) a result that names an empty or placeholder artifact."""
    for name in names:
        artifact = packet.artifact(name)
        if artifact is None or not artifact.stored:
            continue  # never recorded: the state machine names it; a URL: nothing to read
        data, problem = stored_bytes(store, artifact)
        if data is not None:
            problem = substance_problem(name, data, min_bytes=config.min_artifact_bytes,
                                        min_words=config.min_artifact_words)
        if problem:
            raise RuleViolation(
                f"run {packet.id} cannot be marked ready: {problem}",
                hint=f"write the real content, record it again with: waypost artifact add "
                f"{packet.id} {artifact.path or name} --name {name}; then mark it ready")


def hashes_outcome(ctx: Context) -> Outcome | None:
    """The review's built-in re-verification of every stored artifact (None: there are none)."""
    stored = [a for a in ctx.packet.artifacts if a.stored]
    if not stored:
        return None
    problems = [p for a in stored
                for p in (stored_bytes(ctx.store, a)[1] or changed_on_disk(a, ctx),) if p]
    check = Check(spec="artifact hashes", kind=CheckKind.ARTIFACT)
    names = tuple(a.name for a in stored)
    if problems:
        return outcome(check, False, "; ".join(problems), artifacts=names)
    return outcome(check, True, f"{len(stored)} stored artifact(s) re-verified: sha256 intact "
                   "and unchanged on disk", artifacts=names)


# --- grep ---------------------------------------------------------------------------------


def _grep_parts(check: Check) -> tuple[re.Pattern[str], str]:
    pattern, sep, where = check.arg.rpartition(":")
    if not sep or not pattern or not where:
        raise InvalidInput(f"bad check {check.spec!r}: write {check.kind}:PATTERN:PATH")
    try:
        return re.compile(pattern), where
    except re.error as exc:
        raise InvalidInput(f"bad pattern in {check.spec!r}: {exc}") from exc


def _grep_sources(where: str, ctx: Context) -> Iterator[tuple[str, bytes]]:
    """An artifact of that name (its stored copy), else the file or directory on disk."""
    from waypost.sanitize import iter_files

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
    for path in iter_files([str(root)]):
        yield str(path.relative_to(ctx.cwd) if ctx.cwd else path), path.read_bytes()


def _grep(check: Check, ctx: Context) -> Outcome:
    regex, where = _grep_parts(check)
    try:
        hits = [f"{source}:{number}" for source, data in _grep_sources(where, ctx)
                for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
                if regex.search(line)]
    except NotFound as exc:
        return outcome(check, False, exc.message)
    shown = ", ".join(hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
    if check.kind is CheckKind.GREP:
        return outcome(check, bool(hits), f"/{regex.pattern}/ found at {shown}" if hits
                       else f"/{regex.pattern}/ not found in {where}")
    return outcome(check, not hits, f"/{regex.pattern}/ found at {shown}" if hits
                   else f"/{regex.pattern}/ absent from {where}")


# --- no-private -----------------------------------------------------------------------------


def _no_private(check: Check, ctx: Context) -> Outcome:
    from waypost.sanitize import find, scan_bytes

    packet, config = ctx.packet, ctx.config
    names = [n.strip() for n in check.arg.split(",") if n.strip()]
    if not names:
        names = list(packet.result.artifacts) if packet.result and packet.result.artifacts \
            else [a.name for a in packet.artifacts if a.stored]
    findings = []
    for name in names:
        artifact = packet.artifact(name)
        if artifact is None:
            return outcome(check, False, f"no artifact {name!r} was recorded")
        data, problem = stored_bytes(ctx.store, artifact)
        if data is None:
            return outcome(check, False, problem or name)
        findings += scan_bytes(data, name, deny=config.deny, allow=config.allow)
    public = packet.result.public_summary if packet.result else None
    if public:
        findings += find(public, deny=config.deny, allow=config.allow, file="public summary")
    scope = f"{len(names)} artifact(s)" + (" and the public summary" if public else "")
    if not findings:
        return outcome(check, True, f"nothing private in {scope}", artifacts=tuple(names))
    listed = ", ".join(f"{f.kind} in {f.file}:{f.line}" for f in findings[:8])
    more = f" and {len(findings) - 8} more" if len(findings) > 8 else ""
    return outcome(check, False, f"{len(findings)} private identifier(s) in {scope}: "
                   f"{listed}{more}", artifacts=tuple(names))


# --- http ---------------------------------------------------------------------------------


def _http(check: Check, ctx: Context) -> Outcome:
    import urllib.error
    import urllib.request

    url, _, expect = check.arg.partition(" ")
    expect = expect.strip()
    request = urllib.request.Request(url, headers={"User-Agent": "waypost-check"})
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            status, body = int(response.status), response.read(HTTP_READ_LIMIT)
    except urllib.error.HTTPError as exc:
        with exc:
            status, body = exc.code, exc.read(HTTP_READ_LIMIT)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return outcome(check, False, f"GET {url} failed: {reason}",
                       duration_s=round(time.monotonic() - began, 3))
    elapsed = round(time.monotonic() - began, 3)
    seen = expect in body.decode("utf-8", "replace") if expect else True
    summary = f"GET {url} → {status} in {elapsed:.2f}s"
    if expect:
        summary += f", {'found' if seen else 'did not find'} {expect!r}"
    return outcome(check, 200 <= status < 300 and seen, summary, duration_s=elapsed,
                   output_tail=tail(body, ctx.config.output_tail_bytes),
                   log_sha256=ctx.store.put_blob(body))


# --- command --------------------------------------------------------------------------------


def _command(check: Check, ctx: Context) -> Outcome:
    try:
        argv = shlex.split(check.arg)
    except ValueError as exc:
        return outcome(check, False, f"cannot parse the command {check.arg!r}: {exc}")
    ran = run_command(argv, cwd=ctx.cwd, timeout=ctx.config.evidence_timeout)
    if ran.timed_out:
        summary = f"`{check.arg}` was killed after {ctx.config.evidence_timeout:.0f}s (timeout)"
    else:
        summary = f"`{check.arg}` exited {ran.exit_code} in {ran.duration_s:.2f}s"
    return outcome(check, ran.exit_code == 0, summary, command=check.arg, cwd=ctx.cwd,
                   exit_code=ran.exit_code, duration_s=round(ran.duration_s, 3),
                   output_tail=tail(ran.output, ctx.config.output_tail_bytes),
                   log_sha256=ctx.store.put_blob(ran.output))
