"""The doors on a local store, in this process: the SDK (`waypost.start`, `waypost.Run`,
`with waypost.run(...)`), the CLI (`waypost.cli.main(argv)`) and the CLI's stop hook.
Each maps its answer into an outcome class in one function: `sdk_class`, `cli_class`,
`hook_class`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence

import waypost
from waypost.cli import main
from waypost.errors import WaypostError
from waypost.model import (
    ArtifactRole,
    Authority,
    BlockerKind,
    EvidenceKind,
    Kind,
    Verdict,
    to_json,
)

from .driver import (
    ARTIFACT,
    ERROR_OF_CODE,
    GATE,
    RETARGET,
    WAIT_S,
    Driver,
    blocker,
    check_spec,
    class_of,
    epoch_text,
    gate_check,
    gate_name,
    number,
    number_text,
    reviewed,
    seen,
    target,
    title,
    transfer,
    worker,
)
from .terms import OWNER, Call, Cls, Door, Hostile
from .world import SILENCE

# --- the SDK ----------------------------------------------------------------------------

def sdk_class(work: Callable[[], object]) -> Cls:
    """The SDK's answer: ok, or the class of the exception raised; any exception outside
    waypost's tree is not an answer, and fails the test."""
    try:
        work()
    except WaypostError as exc:
        return class_of(type(exc))
    return Cls.OK


class SdkDoor(Driver):
    door = Door.SDK

    def _run(self, call: Call) -> waypost.Run:
        epoch = call.epoch()
        held = epoch.integer if isinstance(epoch, Hostile) else epoch
        return waypost.Run(self.world.store, call.ctx.run, actor=call.name, epoch=held)

    def _file(self) -> str:
        path = self.world.folder / "notes.md"
        path.write_bytes(ARTIFACT)
        return str(path)

    def start(self, call: Call) -> Cls:
        return sdk_class(lambda: waypost.start(
            self.world.store, title(call), actor=call.name,
            owner=OWNER, target=target(call), kind=Kind.LONG_RUNNING,
            max_silence=number(call, "max_silence", SILENCE), expect=number(call, "expect", None),
            deadline=number_text(call, "deadline", None), idempotency_key=call.ctx.key or None,
            worker=worker(call)))

    def claim(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).claim())

    def resume(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).resume())

    def heartbeat(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).heartbeat(
            note="reproduced it", progress=number(call, "progress", 0.5)))

    def block(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).block(BlockerKind.FAILED_COMMAND,
                                                       "the build server refuses connections"))

    def unblock(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).unblock(blocker(call), "resolved it"))

    def artifact(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).add_artifact(
            self._file(), role=ArtifactRole.REPORT, name="notes.md", max_bytes=1 << 20))

    def skip(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).skip_evidence(EvidenceKind.TEST,
                                                               "no staging credentials here"))

    def report(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).report_evidence(
            EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed"))

    def check(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).check(check_spec(call)))

    def command(self, call: Call) -> Cls:
        timeout = number(call, "timeout", 60.0)
        assert timeout is not None
        return sdk_class(lambda: self._run(call).record_command(
            ["touch", str(call.ctx.side)], timeout=timeout))

    def ready(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).ready("fixed: the session comes first"))

    def review(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).review())

    def approve(self, call: Call) -> Cls:
        digest = reviewed(call, self.world)
        return sdk_class(lambda: self._run(call).approve(reviewed=digest))

    def changes(self, call: Call) -> Cls:
        digest = reviewed(call, self.world)
        return sdk_class(lambda: self._run(call).changes("add a test for the empty case",
                                                         reviewed=digest))

    def transfer(self, call: Call) -> Cls:
        authority, to = transfer(call)
        return sdk_class(lambda: self._run(call).transfer(Authority(authority), to))

    def cancel(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).cancel("the test was deleted upstream"))

    def retarget(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).retarget(target(call, RETARGET)))

    def add_gate(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).add_gate(GATE, gate_check(call)))

    def adopt_gate(self, call: Call) -> Cls:
        return sdk_class(lambda: self._run(call).adopt_gate(gate_name(call)))

    def read(self, call: Call) -> Cls:
        try:
            packet = self._run(call).packet
        except WaypostError as exc:
            return class_of(type(exc))
        return seen(to_json(packet).decode())


    def wait(self, call: Call) -> Cls:
        def waited() -> None:
            found = waypost.wait(self.world.store, call.ctx.run, timeout=WAIT_S)
            assert found.outcome == "reached", found

        return sdk_class(waited)


class SdkBlockDoor(Driver):
    """`with waypost.run(...)`: it starts (and claims) the run as it is entered."""

    door = Door.SDK_BLOCK

    def start(self, call: Call) -> Cls:
        def enter() -> None:
            with waypost.run(title(call), owner=OWNER, target=target(call),
                             store=self.world.store, actor=call.name, kind=Kind.LONG_RUNNING,
                             idempotency_key=call.ctx.key or None,
                             max_silence=number(call, "max_silence", SILENCE),
                             expect=number(call, "expect", None),
                             deadline=number_text(call, "deadline", None)):
                pass

        return sdk_class(enter)


# --- the CLI ----------------------------------------------------------------------------

def cli_class(code: int, err: str) -> Cls:
    """The CLI's answer: 0, or the JSON error's code, which must come with the exit code
    the one map gives it (`waypost.errors`); click's usage errors are exit 2."""
    if code == 0:
        return Cls.OK
    error = json.loads(err.strip().splitlines()[-1])["error"]["code"]
    if error == "usage":
        assert code == 2, f"a usage error came as exit {code}"
        return Cls.INVALID
    assert error in ERROR_OF_CODE, f"exit {code}, error code {error!r}: {err}"
    assert code == ERROR_OF_CODE[error].exit_code, f"{error} came as exit {code}"
    return class_of(ERROR_OF_CODE[error])


def run_cli(argv: Sequence[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    """`waypost ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _stdin(data: bytes | None) -> Iterator[None]:
    """Standard input holding `data`, then its end (a pipe, as a host gives a hook)."""
    if data is None:
        yield
        return
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    saved = sys.stdin
    with os.fdopen(read, "rb") as piped:
        sys.stdin = piped  # a hook reads its descriptor only
        try:
            yield
        finally:
            sys.stdin = saved


class CliDoor(Driver):
    door = Door.CLI

    def _cli(self, call: Call, *argv: str, epoch: bool = False,
             tail: Sequence[str] = ()) -> Cls:
        args = [*argv, "--json", "--store", self.world.url, "--as", call.name]
        given = epoch_text(call) if epoch else None
        if given is not None:
            args += ["--epoch", given]
        code, _, err = run_cli([*args, *(["--", *tail] if tail else [])])
        return cli_class(code, err)

    def start(self, call: Call) -> Cls:
        args = ["start", title(call), "--owner", OWNER, "--target",
                target(call), "--kind", "long_running", "--max-silence",
                number_text(call, "max_silence", "1h") or ""]
        for flag, arg in (("--expect", "expect"), ("--deadline", "deadline")):
            given = number_text(call, arg, None)
            args += [flag, given] if given is not None else []
        if call.ctx.key:
            args += ["--idempotency-key", call.ctx.key]
        if worker(call) is not None:
            args += ["--worker", str(worker(call))]
        return self._cli(call, *args)

    def claim(self, call: Call) -> Cls:
        return self._cli(call, "claim", call.ctx.run)

    def resume(self, call: Call) -> Cls:
        return self._cli(call, "resume", call.ctx.run)

    def heartbeat(self, call: Call) -> Cls:
        return self._cli(call, "heartbeat", call.ctx.run, "--note", "reproduced it",
                         "--progress", number_text(call, "progress", "0.5") or "", epoch=True)

    def block(self, call: Call) -> Cls:
        return self._cli(call, "block", call.ctx.run, "--kind", "failed_command", "--detail",
                         "the build server refuses connections", epoch=True)

    def unblock(self, call: Call) -> Cls:
        return self._cli(call, "unblock", call.ctx.run, blocker(call), "--resolution",
                         "resolved it", epoch=True)

    def artifact(self, call: Call) -> Cls:
        path = self.world.folder / "notes.md"
        path.write_bytes(ARTIFACT)
        return self._cli(call, "artifact", "add", call.ctx.run, str(path), "--role", "report",
                         "--name", "notes.md", epoch=True)

    def skip(self, call: Call) -> Cls:
        return self._cli(call, "evidence", "skip", call.ctx.run, "--kind", "test", "--reason",
                         "no staging credentials here", epoch=True)

    def report(self, call: Call) -> Cls:
        return self._cli(call, "evidence", "add", call.ctx.run, "--kind", "test", "--verdict",
                         "passed", "--summary", "pytest -q: 42 passed", epoch=True)

    def check(self, call: Call) -> Cls:
        return self._cli(call, "evidence", "check", call.ctx.run, check_spec(call), epoch=True)

    def command(self, call: Call) -> Cls:
        return self._cli(call, "evidence", "run", call.ctx.run, "--timeout",
                         number_text(call, "timeout", "60s") or "", epoch=True,
                         tail=["touch", str(call.ctx.side)])

    def ready(self, call: Call) -> Cls:
        return self._cli(call, "ready", call.ctx.run, "--summary",
                         "fixed: the session comes first", epoch=True)

    def review(self, call: Call) -> Cls:
        """The CLI's documented rendering of a review that is not approvable: the review
        printed (and recorded), then exit 3 so a script can stop on it. That is the answer
        other doors give as ok with `approvable: false`."""
        args = ["review", call.ctx.run, "--json", "--store", self.world.url, "--as", call.name]
        code, out, err = run_cli(args)
        if code == 3 and out.strip():
            report = json.loads(out)
            assert report["approvable"] is False, report
            assert report["review"], report
            return Cls.OK
        return cli_class(code, err)

    def approve(self, call: Call) -> Cls:
        return self._cli(call, "approve", call.ctx.run, *self._reviewed(call))

    def changes(self, call: Call) -> Cls:
        return self._cli(call, "changes", call.ctx.run, "--reason",
                         "add a test for the empty case", *self._reviewed(call))

    def _reviewed(self, call: Call) -> list[str]:
        digest = reviewed(call, self.world)
        return [] if digest is None else ["--reviewed", digest]

    def transfer(self, call: Call) -> Cls:
        authority, to = transfer(call)
        return self._cli(call, "transfer", call.ctx.run, "--authority", authority, "--to", to)

    def cancel(self, call: Call) -> Cls:
        return self._cli(call, "cancel", call.ctx.run, "--reason", "the test was deleted upstream")

    def retarget(self, call: Call) -> Cls:
        return self._cli(call, "retarget", call.ctx.run, target(call, RETARGET))

    def add_gate(self, call: Call) -> Cls:
        return self._cli(call, "gate", "add", call.ctx.run, f"{GATE}={gate_check(call)}",
                         epoch=True)

    def adopt_gate(self, call: Call) -> Cls:
        return self._cli(call, "gate", "adopt", call.ctx.run, gate_name(call))

    def read(self, call: Call) -> Cls:
        code, out, err = run_cli(["show", call.ctx.run, "--json", "--store", self.world.url,
                                  "--as", call.name])
        return seen(out) if code == 0 else cli_class(code, err)

    def list(self, call: Call) -> Cls:
        return self._cli(call, "ls")

    def wait(self, call: Call) -> Cls:
        return self._cli(call, "wait", call.ctx.run, "--timeout", f"{WAIT_S}s")

    def inbox(self, call: Call) -> Cls:
        code, out, err = run_cli(["inbox", "--json", "--store", self.world.url, "--as",
                                  call.name])
        if code != 0:
            return cli_class(code, err)
        assert json.loads(out)["reader"] == call.name, out
        return self._cli(call, "inbox", "--ack")


# --- the CLI's stop hook ----------------------------------------------------------------


def stop_input(session: str) -> bytes:
    """What Claude Code gives a Stop hook."""
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                       "permission_mode": "default", "hook_event_name": "Stop",
                       "stop_hook_active": False}).encode()


def hook_class(said: dict[str, object]) -> Cls:
    """A stop hook's answer, in Claude Code's format: a block makes the agent go on."""
    return Cls.GO_ON if said.get("decision") == "block" else Cls.MAY_STOP


class HookCliDoor(Driver):
    door = Door.HOOK_CLI

    def stop(self, call: Call) -> Cls:
        code, out, err = run_cli(["hook", "stop", "--host", "claude", "--store", self.world.url],
                                 stdin=stop_input(call.ctx.session))
        assert code == 0, f"a hook always exits 0 (it fails closed): exit {code}: {err}"
        said: dict[str, object] = json.loads(out) if out.strip() else {}
        return hook_class(said)
