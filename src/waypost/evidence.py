"""Evidence that was actually checked: running a command, what it did (`CheckResult`),
and the evidence record made from it."""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO

import msgspec

from waypost.model import Assurance, Evidence, EvidenceKind, Verdict
from waypost.store.base import Store

Echo = Callable[[bytes], None]


class CheckResult(msgspec.Struct, frozen=True, kw_only=True):
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


class CommandOutcome(msgspec.Struct, frozen=True, kw_only=True):
    exit_code: int | None  # None: killed at the timeout
    duration_s: float
    output: bytes  # stdout and stderr, interleaved
    timed_out: bool = False


def run_command(argv: Sequence[str], *, cwd: str | None = None, timeout: float = 3600.0,
                echo: Echo | None = None) -> CommandOutcome:
    """Run `argv`, capturing (and optionally echoing) its combined output."""
    began = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return CommandOutcome(exit_code=127, duration_s=time.monotonic() - began,
                              output=f"cannot run {argv[0]!r}: {exc.strerror}\n".encode())
    chunks: list[bytes] = []
    timed_out = False
    with proc:
        reader = threading.Thread(target=_pump, args=(proc.stdout, chunks, echo), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            timed_out = True
        reader.join(timeout=5 if timed_out else None)
    return CommandOutcome(exit_code=None if timed_out else proc.returncode,
                          duration_s=time.monotonic() - began, output=b"".join(chunks),
                          timed_out=timed_out)


def _pump(stream: IO[bytes] | None, chunks: list[bytes], echo: Echo | None) -> None:
    assert stream is not None
    for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
        chunks.append(chunk)
        if echo is not None:
            echo(chunk)


def tail(data: bytes, limit: int) -> str:
    text = data[-limit:].decode("utf-8", errors="replace") if limit else ""
    return ("…" + text) if len(data) > limit else text


def command_summary(command: str, outcome: CommandOutcome, timeout: float) -> str:
    """What a command did, in a line: its exit code and time, or the timeout that killed it."""
    if outcome.timed_out:
        return f"`{command}` was killed after {timeout:.0f}s (timeout)"
    return f"`{command}` exited {outcome.exit_code} in {outcome.duration_s:.2f}s"


def command_result(argv: Sequence[str], *, store: Store, kind: EvidenceKind = EvidenceKind.COMMAND,
                   cwd: str | None = None, timeout: float = 3600.0, tail_bytes: int = 4096,
                   echo: Echo | None = None) -> CheckResult:
    """Run the command; keep its whole output as a blob and what happened as a result."""
    outcome = run_command(argv, cwd=cwd, timeout=timeout, echo=echo)
    log_sha = store.put_blob(outcome.output)
    command = shlex.join(argv)
    return CheckResult(
        kind=kind, verdict=Verdict.PASSED if outcome.exit_code == 0 else Verdict.FAILED,
        summary=command_summary(command, outcome, timeout), command=command, cwd=cwd,
        exit_code=outcome.exit_code, duration_s=round(outcome.duration_s, 3),
        output_tail=tail(outcome.output, tail_bytes), log_sha256=log_sha)


def to_evidence(found: CheckResult, *, id: str, assurance: Assurance, at: datetime, by: str,
                gate: str | None = None, review: str | None = None) -> Evidence:
    return Evidence(id=id, kind=found.kind, verdict=found.verdict, assurance=assurance,
                    summary=found.summary, command=found.command, cwd=found.cwd,
                    exit_code=found.exit_code, duration_s=found.duration_s,
                    output_tail=found.output_tail, log_sha256=found.log_sha256,
                    artifacts=found.artifacts, gate=gate, review=review, recorded_at=at,
                    recorded_by=by)
