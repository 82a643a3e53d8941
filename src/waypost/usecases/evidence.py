"""Evidence that was actually checked: running a command, what it did (`CheckResult`),
and the evidence record made from it."""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Final

import msgspec

from waypost.config import Config
from waypost.model import Assurance, Evidence, EvidenceKind, Verdict
from waypost.store.base import Store
from waypost.system.process import Echo, Finished, Tick, run_bounded

MAX_OUTPUT_BYTES: Final = Config().max_output_bytes  # unless [limits] says otherwise


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
    reason: str | None = None  # why it did not run (verdict skipped)


def run_command(argv: Sequence[str], *, cwd: str | None = None, timeout: float = 3600.0,
                max_output: int = MAX_OUTPUT_BYTES, echo: Echo | None = None,
                tick: Tick | None = None) -> Finished:
    """Run `argv` within bounds (see `waypost.system.process`), capturing (and optionally
    echoing) its combined output; a command that cannot start exits 127, as in a shell."""
    began = time.monotonic()
    try:
        return run_bounded(argv, timeout=timeout, max_output=max_output, cwd=cwd, echo=echo,
                           tick=tick)
    except OSError as exc:
        said = f"cannot run {argv[0]!r}: {exc.strerror}\n".encode()
        return Finished(exit_code=127, duration_s=time.monotonic() - began, output=said,
                        total_bytes=len(said))


def tail(data: bytes, limit: int) -> str:
    text = data[-limit:].decode("utf-8", errors="replace") if limit else ""
    return ("…" + text) if len(data) > limit else text


def command_summary(command: str, outcome: Finished, timeout: float) -> str:
    """What a command did, in a line: its exit code and time, or the timeout that killed it,
    and whether its output was cut (the log keeps only the end)."""
    if outcome.timed_out:
        said = f"`{command}` was killed after {timeout:g}s (timeout)"
    else:
        said = f"`{command}` exited {outcome.exit_code} in {outcome.duration_s:.2f}s"
    if outcome.truncated:
        said += (f" … (output truncated: {outcome.total_bytes} bytes, kept the last "
                 f"{size(len(outcome.output))})")
    return said


def size(count: int) -> str:
    """A byte count as people write it: 4 MB, 64 KB, 1000 bytes."""
    for unit, name in ((1024 * 1024, "MB"), (1024, "KB")):
        if count >= unit and count % unit == 0:
            return f"{count // unit} {name}"
    return f"{count} bytes"


def command_result(argv: Sequence[str], *, store: Store, kind: EvidenceKind = EvidenceKind.COMMAND,
                   cwd: str | None = None, timeout: float = 3600.0, tail_bytes: int = 4096,
                   max_output: int = MAX_OUTPUT_BYTES, echo: Echo | None = None,
                   tick: Tick | None = None) -> CheckResult:
    """Run the command; keep its output (the last `max_output` bytes) as a blob and what
    happened as a result. `tick` is called while it runs (`evidence run` heartbeats)."""
    outcome = run_command(argv, cwd=cwd, timeout=timeout, max_output=max_output, echo=echo,
                          tick=tick)
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
                    reason=found.reason, artifacts=found.artifacts, gate=gate, review=review,
                    recorded_at=at, recorded_by=by)
