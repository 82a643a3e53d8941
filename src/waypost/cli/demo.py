"""`waypost demo`: the whole story with real processes, on a store of its own.

A parent records a long-running run (gates, a webhook target, a notify file); a watchdog
and a relay run as their own processes, and so does a local webhook receiver that checks
every signature and applies each delivery once. worker-1, a process of its own, drafts and
records evidence, then dies (SIGKILL). The watchdog notices the silence and the owner is
told; worker-2 resumes from the handoff brief, worker-1's late write is refused, worker-2
finishes; the owner reviews and approves; the relay delivers once, and a second pass sends
nothing. Every step is checked from the store and the receiver, not assumed: each step
is tied to the events it narrates (worker-1's claim came first, the watchdog blocked the
run for worker-1's silence after it died, worker-2's resume took over from worker-1 and
ended that silence), and the demo exits 0 only if all of it happened as told; otherwise
it fails saying what differed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from waypost.cli.context import Ctx, verb
from waypost.cli.demo_actors import with_options
from waypost.errors import WaypostError
from waypost.events import BlockerOpened, BlockerResolved, Claimed, Event
from waypost.model import BlockerKind, Packet

WAIT_LIMIT = 60.0  # the longest any step may take before the demo says it did not happen
Say = Callable[[str], None]


class DemoFailed(WaypostError):
    """A step of the demo did not happen."""


class Demo:
    """The demo's work folder, its store, its processes, and the narration."""

    def __init__(self, work: Path, store: str, say: Say) -> None:
        self.work = work
        self.store = store
        self.say = say
        self.secret = (os.environ.get("WAYPOST_WEBHOOK_SECRET")
                       or "whsec_" + base64.b64encode(os.urandom(24)).decode())
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
        self.env.update(WAYPOST_URL=store, WAYPOST_WEBHOOK_SECRET=self.secret)
        self.procs: list[subprocess.Popen[bytes]] = []

    def wp(self, *args: str, actor: str, expect: int = 0) -> str:
        """`waypost ARGS --as ACTOR`, narrated as typed, run in this process."""
        from waypost.cli import main

        self.say(f"$ waypost {shlex.join(with_options(list(args), '--as', actor))}")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(with_options(list(args), "--store", self.store, "--as", actor))
        if code != expect:
            failed = DemoFailed(f"`waypost {shlex.join(args)}` exited {code}, not {expect}: "
                                f"{err.getvalue().strip()}")
            failed.exit_code = code if code in (2, 3, 4, 5, 75) else 1  # the step's own
            raise failed
        shown = (out.getvalue() + err.getvalue()).rstrip()
        if shown:
            self.say(shown)
        if code:
            self.say(f"(exit {code}, as it should be)")
        return out.getvalue().strip()

    def spawn(self, shown: str, *argv: str) -> subprocess.Popen[bytes]:
        """A background process, narrated as `shown &`."""
        self.say(f"$ {shown} &")
        proc = subprocess.Popen([sys.executable, *argv], cwd=self.work, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def packet(self, run: str) -> Packet:
        from waypost.store import open_store

        with open_store(self.store) as store:
            return store.get(run)

    def events(self, run: str) -> list[Event]:
        from waypost.store import open_store

        with open_store(self.store) as store:
            return list(store.events(run))

    def wait(self, what: str, happened: Callable[[], bool]) -> None:
        """Until `happened()`; a DemoFailed naming `what` after WAIT_LIMIT seconds."""
        began = time.monotonic()
        while not happened():
            if time.monotonic() - began > WAIT_LIMIT:
                raise DemoFailed(f"the demo waited {WAIT_LIMIT:.0f}s for {what}; it did not "
                                 "happen")
            time.sleep(0.2)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_demo(directory: str | None, *, store_url: str | None = None,
             echo: Say | None = print, worker_delay: float = 0.0) -> dict[str, Any]:
    """Tell the whole story in `directory` (a new temp dir by default) on its own SQLite
    store (or `store_url`, when one is given explicitly); return what happened.
    `worker_delay` holds worker-1 back that many seconds before it claims (as a loaded
    machine may): past the 3s max-silence, the story differs and the demo fails."""
    work = Path(directory or tempfile.mkdtemp(prefix="waypost-demo-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    demo = Demo(work, store_url or str(work / ".waypost" / "waypost.db"),
                echo or (lambda _line: None))
    with contextlib.chdir(work), _stopping(demo):
        return _story(demo, worker_delay)


@contextlib.contextmanager
def _stopping(demo: Demo) -> Iterator[None]:
    try:
        yield
    finally:
        demo.stop_all()


def _story(demo: Demo, worker_delay: float = 0.0) -> dict[str, Any]:
    say, work = demo.say, demo.work
    hook = _receiver(demo)
    say("\n# 1. The parent records the run before any work starts: owner, target, notify, "
        "stop rules, gates.")
    demo.wp("init", actor="alice")
    run = demo.wp("start", "Write the release notes", "--owner", "alice",
                  "--kind", "long_running", "--target", hook, "--notify", "file:notices.md",
                  "--heartbeat-interval", "1s", "--max-silence", "3s",
                  "--gate", "notes=artifact:notes.md", "--gate", "clean=no-private",
                  actor="alice")
    say("\n# 2. A watchdog and a relay run as processes of their own.")
    demo.spawn("waypost watch --interval 1s", "-m", "waypost", "watch", "--interval", "1s",
               "--id", "demo-watch")
    demo.spawn("waypost deliver --interval 0.5s", "-m", "waypost", "deliver",
               "--interval", "0.5s", "--backoff-base", "0.5s")
    killed = _worker_one_dies(demo, run, worker_delay)
    silent = _silence_noticed(demo, run, killed)
    _worker_two_resumes(demo, run, silent)
    _owner_approves(demo, run)
    receipt = _delivered_once(demo, run)
    say("\n# The board, and the run as delivered")
    demo.wp("ls", "--all", actor="alice")
    demo.wp("show", run, actor="alice")
    demo.wp("verify", run, actor="alice")
    demo.stop_all()
    say(f"\nThe store: {demo.store}\nThe receiver's log: {work / 'received' / 'log.jsonl'}\n"
        f"The delivered document: {work / 'received' / (receipt + '.json')}\n"
        f"The owner's notices: {work / 'notices.md'}\n"
        f"Explore it: cd {shlex.quote(str(work))} && waypost log {run}")
    return {"run": run, "store": demo.store, "work": str(work),
            "packet": json.loads(_quiet_show(demo, run)), "delivery_id": receipt}


def _quiet_show(demo: Demo, run: str) -> str:
    from waypost.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["show", run, "--json", "--store", demo.store])
    return out.getvalue()


def _receiver(demo: Demo) -> str:
    received = demo.work / "received"
    received.mkdir(exist_ok=True)
    port_file = received / "port"
    demo.spawn("a webhook receiver on 127.0.0.1 that checks signatures and dedupes",
               "-m", "waypost.cli.demo_actors", "receiver", str(port_file),
               str(received / "receiver.db"), str(received / "log.jsonl"))
    demo.wait("the receiver to listen", lambda: port_file.exists() and bool(port_file.read_text()))
    return f"http://127.0.0.1:{port_file.read_text().strip()}/hook"


def _worker_one_dies(demo: Demo, run: str, delay: float) -> int:
    """Steps 3 and 4; the seq of the run's last event when worker-1 was killed."""
    demo.say("\n# 3. worker-1, a process of its own, drafts, heartbeats and records evidence.")
    worker = demo.spawn(f"worker-1: waypost claim {run} --as worker-1; heartbeat; artifact "
                        "add; evidence run; heartbeat every 0.5s", "-m",
                        "waypost.cli.demo_actors", "worker", demo.store, run,
                        str(demo.work / "draft.md"), str(delay))
    demo.wait("worker-1's evidence", lambda: bool(demo.packet(run).evidence))
    demo.say(f"\n# 4. worker-1 dies mid-work.\n$ kill -9 {worker.pid}")
    worker.kill()
    worker.wait()
    events = demo.events(run)
    _check_worker_one_worked(events)
    return events[-1].seq


def _silent_blockers(events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e.data, BlockerOpened)
            and e.data.kind is BlockerKind.WORKER_SILENT]


def _at(event: Event) -> str:
    return f"{event.at:%H:%M:%S}Z"


def _check_worker_one_worked(events: list[Event]) -> None:
    """Step 3 as told: worker-1's claim (epoch 1) came first, and no worker_silent blocker
    was raised before worker-1 was killed."""
    claims = [e for e in events if isinstance(e.data, Claimed)]
    silent = _silent_blockers(events)
    first = claims[0] if claims else None
    if silent and (first is None or silent[0].seq < first.seq):
        blocker = silent[0]
        assert isinstance(blocker.data, BlockerOpened)
        raise DemoFailed(
            f"the story differs at step 3: {blocker.actor} blocked the run as worker_silent "
            f"({blocker.data.blocker_id}, {_at(blocker)}) before worker-1 claimed it"
            + (f" ({_at(first)})" if first else "") + ": worker-1 started later than the "
            "3s max-silence, so the watchdog saw a run nobody had claimed")
    if first is None or (first.actor, getattr(first.data, "epoch", None)) != ("worker-1", 1):
        raise DemoFailed("the story differs at step 3: the first claim of the run was not "
                         "worker-1's at epoch 1" + (f" ({first.actor})" if first else ""))
    if silent:
        raise DemoFailed(
            f"the story differs at step 4: {silent[0].actor} blocked the run as "
            f"worker_silent ({_at(silent[0])}) while worker-1 was still working, before it "
            "was killed")


def _silence_noticed(demo: Demo, run: str, killed: int) -> str:
    """Step 5; the id of the watchdog's worker_silent blocker for worker-1's silence."""
    demo.say("\n# 5. Nobody heartbeats for 3s: the watchdog blocks the run as worker_silent, "
             "and the relay tells the owner.")
    demo.wait("the watchdog's worker_silent blocker", lambda: bool(
        _silent_blockers([e for e in demo.events(run) if e.seq > killed])))
    after = [e for e in demo.events(run) if e.seq > killed]
    blocker = _silent_blockers(after)[0]
    assert isinstance(blocker.data, BlockerOpened)
    taken = [e for e in after if isinstance(e.data, Claimed) and e.seq < blocker.seq]
    if not blocker.actor.startswith("watchdog:") or taken:
        raise DemoFailed(
            f"the story differs at step 5: the worker_silent blocker {blocker.data.blocker_id}"
            f" was raised by {blocker.actor}"
            + (f" after {taken[0].actor} claimed the run" if taken else "")
            + ", not by the watchdog for worker-1's silence (lease epoch 1)")
    notices = demo.work / "notices.md"
    demo.wait("the owner's notice", lambda: notices.exists() and "silent" in notices.read_text())
    demo.say(f"$ cat notices.md\n{notices.read_text().strip()}")
    return blocker.data.blocker_id


def _check_resumed(events: list[Event], since: int, blocker: str) -> None:
    """Step 6 as told: worker-2's claim took over from worker-1 and resolved the blocker."""
    after = [e for e in events if e.seq > since]
    claim = next((e for e in after if isinstance(e.data, Claimed)), None)
    resolved = next((e for e in after if isinstance(e.data, BlockerResolved)
                     and e.data.blocker_id == blocker), None)
    told = (claim is not None and isinstance(claim.data, Claimed)
            and (claim.actor, claim.data.took_over_from) == ("worker-2", "worker-1")
            and resolved is not None and resolved.actor == "worker-2")
    if not told:
        raise DemoFailed(
            "the story differs at step 6: worker-2's resume did not take the lease over "
            f"from worker-1 and resolve {blocker} ("
            + ", ".join(f"#{e.seq} {e.type} by {e.actor}" for e in after) + ")")


def _worker_two_resumes(demo: Demo, run: str, blocker: str) -> None:
    demo.say("\n# 6. worker-2 takes over from the handoff brief (the silent lease is free).")
    since = demo.events(run)[-1].seq
    demo.wp("resume", run, actor="worker-2")
    _check_resumed(demo.events(run), since, blocker)
    demo.say("\n# 7. worker-1's late write is refused: its lease (epoch 1) was taken over.")
    demo.wp("heartbeat", run, "--epoch", "1", "--note", "still here?", actor="worker-1",
            expect=3)
    demo.say("\n# 8. worker-2 finishes the notes, records what it checked, and submits.")
    Path("notes.md").write_text(
        "# Release notes\n\n- Faster start-up for the heartbeat verb.\n"
        "- A worker that goes quiet is noticed, and another can take over.\n", "utf-8")
    demo.wp("artifact", "add", run, "notes.md", "--role", "result", actor="worker-2")
    demo.wp("evidence", "run", run, "--kind", "test", "--", "grep", "-c", "^- ", "notes.md",
            actor="worker-2")
    demo.wp("ready", run, "--summary", "release notes written from the merged changes",
            "--public-summary", "Release notes: faster heartbeats; silent workers noticed.",
            "--artifact", "notes.md", actor="worker-2")


def _owner_approves(demo: Demo, run: str) -> None:
    demo.say("\n# 9. The owner re-runs every gate here, then approves.")
    demo.wp("review", run, actor="alice")
    demo.wp("approve", run, actor="alice")


def _delivered_once(demo: Demo, run: str) -> str:
    demo.say("\n# 10. The relay delivers the result to the recorded target, once.")
    demo.wait("the delivery", lambda: demo.packet(run).state == "delivered")
    log = demo.work / "received" / "log.jsonl"
    finals = _finals(log)
    demo.say(f"the receiver applied {len(finals)} final delivery: webhook-id {finals[0]}")
    demo.wp("deliver", "--once", actor="alice")
    if _finals(log) != finals or len(finals) != 1:
        raise DemoFailed(f"the receiver applied {len(_finals(log))} final deliveries, not 1")
    demo.say("a second relay pass sent nothing more: the receiver still has one")
    return finals[0]


def _finals(log: Path) -> list[str]:
    """The webhook-ids of the final deliveries the receiver applied."""
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [entry["headers"]["webhook-id"] for entry in lines
            if entry["outcome"] == "applied" and '"type":"final"' in entry["body"]]


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Work here "
              "[default: a new temporary directory].")
@verb
def demo(ctx: Ctx, directory: str | None) -> None:
    """Tell the whole story with real processes (~20 s), on a store of its own.

    A worker dies, the watchdog notices, a second worker resumes, the owner approves and
    a signed webhook is delivered once. WAYPOST_URL is ignored: only an explicit --store
    points the demo at another store.
    """
    explicit = click.get_current_context().get_parameter_source("store_url")
    store = ctx.store_url if explicit is click.core.ParameterSource.COMMANDLINE else None
    result = run_demo(directory, store_url=store, echo=None if ctx.json else click.echo)
    if ctx.json:
        ctx.emit(result, "")

