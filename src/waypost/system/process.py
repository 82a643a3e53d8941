"""Running a command within bounds (`evidence run`, the `command:` check; fit for the `exec:`
target): in its own session, so its whole process group can be stopped; one deadline for
everything, the reading included (a grandchild holding the output pipe open cannot make us
wait); at most `max_output` bytes of what it wrote are kept (the end, where failures are),
and the rest is counted. When the command exits, what it left running in its group is
stopped too: evidence must not leave processes behind. A caller that must keep doing
something while it waits (`evidence run` heartbeats the run) passes a `Tick`: it is called
from the same waiting loop, on this thread, every `every` seconds."""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Final

from waypost.errors import InvalidInput

Echo = Callable[[bytes], None]
GRACE: Final = 1.0  # seconds between SIGTERM and SIGKILL to the group
DRAIN: Final = 0.25  # after the command exits, how long its last output may still arrive
POLL: Final = 0.05  # how often the loop looks whether the command has exited
CHUNK: Final = 65536


@dataclass(frozen=True, kw_only=True)
class Finished:
    """What a bounded command did."""

    exit_code: int | None  # None: stopped at the deadline; negative: killed by that signal
    duration_s: float
    output: bytes  # stdout and stderr interleaved: the last `max_output` bytes of it
    total_bytes: int  # how many bytes it wrote in all
    timed_out: bool = False

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.output)


@dataclass(frozen=True, kw_only=True)
class Tick:
    """`call()` every `every` seconds while the command runs. It runs in the waiting loop:
    while it runs, the output is not read (the command may pause on a full pipe) and the
    deadline is not looked at, so keep it short. An exception from it stops the command's
    group and propagates: a caller that wants the command to finish catches its own."""

    call: Callable[[], None]
    every: float


class _Ticker:
    """When the next tick is due, and calling it then (no tick: never due)."""

    def __init__(self, tick: Tick | None, now: float) -> None:
        self.tick = tick
        self.next_at = math.inf if tick is None else now + max(tick.every, POLL)

    def poll(self, now: float) -> None:
        if self.tick is not None and now >= self.next_at:
            self.tick.call()
            self.next_at = time.monotonic() + max(self.tick.every, POLL)


class Tail:
    """The last `limit` bytes written and the count of all of them (memory: about twice `limit`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.limit:
            self.kept += chunk
            if len(self.kept) > 2 * self.limit:
                del self.kept[:-self.limit]

    def value(self) -> bytes:
        return bytes(self.kept[-self.limit:]) if self.limit else b""


def check_timeout(timeout: float) -> None:
    if not (math.isfinite(timeout) and timeout > 0):
        raise InvalidInput(f"a command's timeout must be a positive number of seconds, "
                           f"not {timeout!r}", hint="e.g. --timeout 10m")


def run_bounded(argv: Sequence[str], *, timeout: float, max_output: int,
                cwd: str | None = None, env: Mapping[str, str] | None = None,
                stdin: bytes | None = None, echo: Echo | None = None,
                tick: Tick | None = None) -> Finished:
    """Run `argv` (no shell) until it exits or `timeout` seconds pass, whichever is first;
    then stop whatever is left of its process group. Raises OSError if it cannot start.
    `tick` is called periodically while it runs (see `Tick`)."""
    check_timeout(timeout)
    if not argv:
        raise InvalidInput("no command to run", hint="name a command, e.g. -- pytest -q")
    began = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except ValueError as exc:  # a NUL byte in an argument or the environment
        raise InvalidInput(f"cannot run {argv[0]!r}: {exc}") from exc
    kept = Tail(max(0, max_output))
    try:
        timed_out = _pump(proc, stdin, kept, echo, began + timeout, _Ticker(tick, began))
    finally:
        _stop_group(proc)
    return Finished(exit_code=None if timed_out else proc.returncode,
                    duration_s=time.monotonic() - began, output=kept.value(),
                    total_bytes=kept.total, timed_out=timed_out)


def _pump(proc: subprocess.Popen[bytes], data: bytes | None, kept: Tail, echo: Echo | None,
          deadline: float, ticker: _Ticker) -> bool:
    """Feed stdin and read the output until both are done and the command has exited, or
    the deadline passes (True). Output still flowing `DRAIN` s after the exit is not waited
    for: it comes from something the command left running."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        _register(selector, proc.stdout, selectors.EVENT_READ)
        if proc.stdin is not None:
            _register(selector, proc.stdin, selectors.EVENT_WRITE)
        pending = memoryview(data or b"")
        exited_at: float | None = None
        while selector.get_map():
            ticker.poll(time.monotonic())
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            until = deadline if exited_at is None else min(deadline, exited_at + DRAIN)
            if now >= until:
                return exited_at is None
            for key, _ in selector.select(min(until - now, POLL)):
                stream = key.fileobj
                if stream is proc.stdout:
                    _read(selector, proc.stdout, kept, echo)
                else:
                    pending = _write(selector, proc.stdin, pending)
    return _wait(proc, deadline, ticker)


def _register(selector: selectors.BaseSelector, stream: IO[bytes], events: int) -> None:
    os.set_blocking(stream.fileno(), False)
    selector.register(stream, events)


def _read(selector: selectors.BaseSelector, stream: IO[bytes], kept: Tail,
          echo: Echo | None) -> None:
    try:
        chunk = os.read(stream.fileno(), CHUNK)
    except BlockingIOError:
        return
    if not chunk:
        selector.unregister(stream)
        return
    kept.add(chunk)
    if echo is not None:
        echo(chunk)


def _write(selector: selectors.BaseSelector, stream: IO[bytes] | None,
           pending: memoryview) -> memoryview:
    assert stream is not None
    try:
        pending = pending[os.write(stream.fileno(), pending):] if pending else pending
    except BlockingIOError:
        return pending
    except BrokenPipeError:  # it stopped reading: the rest of its input does not matter
        pending = pending[:0]
    if not pending:
        selector.unregister(stream)
        stream.close()
    return pending


def _wait(proc: subprocess.Popen[bytes], deadline: float, ticker: _Ticker) -> bool:
    """Its output is closed; wait for the command itself until the deadline (True: passed),
    ticking on the way. Each pass ends at a tick or at the deadline: the loop is bounded."""
    while True:
        ticker.poll(time.monotonic())
        now = time.monotonic()
        if now >= deadline:
            return proc.poll() is None
        try:
            proc.wait(timeout=min(deadline, ticker.next_at) - now)
        except subprocess.TimeoutExpired:
            continue
        return False


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the command's whole group, SIGKILL to what is left after `GRACE`; the
    command itself is reaped. (A process that left the group with setsid is out of reach.)"""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    if _signal_group(proc.pid, signal.SIGTERM):
        end = time.monotonic() + GRACE
        while time.monotonic() < end and (proc.poll() is None or _group_alive(proc.pid)):
            time.sleep(0.02)
        _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the kernel: let it be
        proc.wait(timeout=GRACE)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except OSError:  # the group is gone (or no longer ours to signal)
        return False
    return True


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)
