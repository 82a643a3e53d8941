"""`waypost demo`: a whole run, end to end, through the real CLI on a fresh SQLite store."""

from __future__ import annotations

import contextlib
import io
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from waypost.cli.context import Ctx, verb
from waypost.errors import WaypostError
from waypost.model import from_json


def run_demo(directory: str | None, *, store_url: str | None = None,
             echo: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Run the demo flow in `directory` (a new temp dir by default); return the final packet."""
    work = Path(directory or tempfile.mkdtemp(prefix="waypost-demo-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.chdir(work):
        return _flow(work, store_url, echo)


def _flow(work: Path, store_url: str | None,
          echo: Callable[[str], None] | None) -> dict[str, Any]:
    store = store_url or str(work / ".waypost" / "waypost.db")
    say = echo or (lambda _line: None)

    def wp(*args: str, actor: str = "worker-1") -> str:
        verb_words = 2 if args[0] in ("artifact", "evidence") else 1
        argv = [*args[:verb_words], "--store", store, "--as", actor, *args[verb_words:]]
        say(f"$ waypost {shlex.join(args)}" + ("" if actor == "worker-1" else f"  # as {actor}"))
        return _invoke(argv, say)

    say(f"# a fresh store in {work}")
    wp("init")
    run = wp("start", "Write the release notes", "--owner", "alice", "--kind", "long_running",
             "--target", "file:result.md", "--heartbeat-interval", "5m",
             "--max-silence", "30m", "--gate", "notes=artifact:notes.md",
             actor="alice").strip()
    wp("claim", run)
    wp("heartbeat", run, "--note", "collecting merged changes", "--progress", "0.2")
    blocker = wp("block", run, "--kind", "missing_input", "--detail",
                 "which release tag to diff against").strip()
    wp("unblock", run, blocker, "--resolution", "alice: diff against v1.4.0", actor="alice")
    notes = Path("notes.md")
    notes.write_text("# Release notes\n\n- Faster startup for the heartbeat verb.\n"
                     "- Clearer errors when a lease is stale.\n", "utf-8")
    wp("artifact", "add", run, "notes.md", "--role", "result")
    wp("evidence", "run", run, "--kind", "grep", "--", "grep", "-c", "^- ", "notes.md")
    wp("evidence", "skip", run, "--kind", "live_check", "--reason",
       "no staging site exists for this project")
    wp("ready", run, "--summary", "release notes drafted from merged changes",
       "--public-summary", "Release notes for 1.5: faster heartbeats, clearer lease errors.",
       "--artifact", "notes.md")
    wp("review", run, actor="alice")
    wp("approve", run, actor="alice")
    wp("deliver", "--once", "--dir", str(work), actor="alice")
    wp("show", run)
    say(f"# {work / 'result.md'}, as delivered (once):")
    say((work / "result.md").read_text("utf-8").rstrip())
    wp("verify", run)
    packet = _invoke(["show", run, "--store", store, "--json"], lambda _line: None)
    return from_json(packet, dict[str, Any])


def _invoke(argv: list[str], say: Callable[[str], None]) -> str:
    from waypost.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = out.getvalue()
    if code != 0:
        raise WaypostError(f"demo step `waypost {shlex.join(argv)}` failed ({code}): "
                           f"{err.getvalue().strip()}")
    if text.strip():
        say(text.rstrip())
    return text


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Work here "
              "[default: a new temporary directory].")
@verb
def demo(ctx: Ctx, directory: str | None) -> None:
    """Run a whole flow end to end on a fresh SQLite store and print the packet."""
    result = run_demo(directory, store_url=ctx.store_url, echo=None if ctx.json else click.echo)
    if ctx.json:
        ctx.emit(result, "")
