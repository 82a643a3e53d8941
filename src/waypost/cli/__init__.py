"""The `waypost` executable: a thin adapter over the library.

    __init__.py  `console()`, the console script: start-up work before anything loads;
                 `main(argv)`: runs a command line; the one error → exit code map
    context.py   what every verb shares: store, actor, output, and its options as data
                 (built into click commands; parsed without click for the hot verbs)
    hot.py       heartbeat, show, block, ls: run without click
    app.py       the click command tree (every other verb, and --help)
    lifecycle.py outputs.py review.py gates.py delivery.py watch.py ops.py retarget.py
    tokens.py limits.py serve.py mcp.py hook.py hosts.py demo.py demo_actors.py wait.py
    bundle.py:   the verbs (bundle.py: export, verify-bundle, keys)
    render.py    the packet, the board and the log as text and Markdown
    steps.py     a refusal's next steps as the command lines to type

Every verb takes --json (one document on stdout; errors as {"error": {...}} on stderr),
--store (or WAYPOST_URL) and --as (or WAYPOST_ACTOR). Exit codes: 0 ok, 1 unexpected,
2 usage or bad input, 3 refused by the rules, 4 not found, 5 conflict, 6 a waited-for
run ended otherwise (`wait`), 10-16 what `verify-bundle` found (its --help lists them),
75 nothing was written, try again (the store is busy, the disk is full, or `wait` timed
out).

Importing this package loads nothing but the exceptions: a hot verb's process readies
itself first (`console`), then `main` loads what it runs.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from waypost.errors import WaypostError

__all__ = ["console", "main"]


# --- start-up: work that must happen before the CLI loads ---------------------------------
# A hot verb (heartbeat, show, block, ls) is a process that does one thing and exits, run
# between every step of an agent's work, so it starts as light as it can:
#
# - msgspec imports typing_extensions whenever it is installed (httpx brings it in, so every
#   install has it), only for its versions of `get_type_hints`, `Required` and `NotRequired`,
#   and uses `typing`'s when it is absent. waypost's records use nothing from it, and
#   importing it (with `inspect`, `ast` and `dis` behind it) costs ~9 ms, a sixth of a
#   heartbeat. So it is hidden while msgspec loads, and imports normally afterwards.
# - msgspec imports uuid, and before Python 3.13 uuid imports `platform` on Linux for one
#   call, `platform.system()`, at import (3.13's uuid no longer does). Loading `platform`
#   compiles nine regular expressions, ~2-4 ms. A stand-in answering that one call as
#   `platform` does on POSIX serves uuid's import instead, and leaves `sys.modules` after:
#   any later `import platform` loads the real module (uuid keeps its own name for the
#   stand-in, which it asks nothing after its import).
# - No cyclic garbage collection (see `main`), and events are hashed with Python's own
#   SHA-256, sparing the load of OpenSSL (`waypost.core.history.prefer_quick_start`).
# - No interpreter teardown: once the verb has closed its store and its output is flushed,
#   the process ends at once (`exit_now`), sparing the ~4 ms of unloading every module.
#
# Every other command, and any program that imports waypost as a library, starts as usual.

# `waypost.cli.hot.HOT`; a test keeps them equal
HOT_VERBS = ("heartbeat", "show", "block", "ls", "hook")
HASHING = ("heartbeat", "block")  # the hot verbs that write, so hash an event; reads never do


def console() -> int:
    """The console script (`waypost`): readies a hot verb's process, then runs `main`."""
    one_shot = len(sys.argv) > 1 and sys.argv[1] in HOT_VERBS
    if one_shot:
        # No cyclic garbage collection: ~17 collections ran while a heartbeat loaded its
        # modules (~3 ms), in a process that makes no garbage cycles worth freeing and exits.
        gc.disable()
        import_msgspec_lean()
        if sys.argv[1] in HASHING:
            from waypost.core import history  # the write path loads it all the same

            history.prefer_quick_start()
    code = main()
    if one_shot:
        exit_now(code)
    return code


def exit_now(code: int) -> None:
    """End the process with `code` once stdout and stderr are flushed, skipping the
    interpreter's teardown: clearing every module and a last garbage collection, ~4 ms in a
    process that has closed its store and exits anyway. atexit handlers do not run (the one
    a hot verb may have, logging's on a PostgreSQL store, has nothing to write). It returns,
    and the usual exit follows, where that teardown matters: under a profiler, tracer or
    coverage tool, which write their results then, or when a stream cannot be flushed."""
    if _observed():
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed when the process began
                stream.flush()
    except Exception:  # whatever it is, the usual exit reports it
        return
    os._exit(code)


def _observed() -> bool:
    """Whether a profiler, tracer or monitoring tool (coverage, a debugger) is attached."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+
    return monitoring is not None and any(monitoring.get_tool(tool) is not None
                                          for tool in range(6))


def import_msgspec_lean() -> None:
    """Import msgspec with typing_extensions hidden and, where uuid has not loaded yet,
    `platform` stood in for (see the start-up notes above); a msgspec that cannot load so is
    imported again as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    hidden: dict[str, object] = {"typing_extensions": None}
    if ("platform" not in sys.modules and "uuid" not in sys.modules
            and os.name == "posix" and sys.platform != "darwin"):
        hidden["platform"] = _platform_for_uuid()
    sys.modules.update(hidden)  # type: ignore[arg-type]  # None: "import" refuses it
    try:
        import msgspec  # noqa: F401
    except ImportError:  # msgspec loads again as usual; uuid, loaded, stays (its core
        # keeps the UUID class it found, and the stand-in answered as `platform` does)
        for name in [n for n in sys.modules if n.partition(".")[0] == "msgspec"]:
            del sys.modules[name]
    finally:
        for name, module in hidden.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def _platform_for_uuid() -> object:
    """What uuid's import asks of `platform` on POSIX: `system()`, which `platform` answers
    with `os.uname().sysname` there."""
    import types

    stand_in = types.ModuleType("platform", "waypost's stand-in while msgspec loads")
    stand_in.system = lambda: os.uname().sysname  # type: ignore[attr-defined]
    return stand_in


def main(argv: Sequence[str] | None = None, *, fast: bool = True) -> int:
    """Run the CLI; returns the exit code (every error mapped here, click's included).
    `fast=False` sends every command line through click, as any the fast path does not
    understand is."""
    # here, not at the top: `console` readies a hot verb's process before these load
    from waypost.cli.context import echo, invoke
    from waypost.cli.hot import HOT, hot_values

    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        from waypost.inputs import utf8

        utf8(args)
        values = hot_values(args) if fast else None
        if values is None:
            from waypost.cli.app import run_click

            return run_click(args)
        invoke(HOT[args[0]].run, values)
    except WaypostError as exc:
        from waypost.cli.steps import document  # only when there is an error to report

        report_error(document(exc), as_json)
        return exc.exit_code
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)  # as click reports an interrupted command: end the ^C line
        echo("aborted", err=True)
        return 1
    except BrokenPipeError:  # the reader went away (`waypost ls | head -1`)
        _ignore_closed_pipes()
        return 1
    except Exception as exc:
        code = _click_outcome(exc, as_json)
        if code is not None:
            return code
        if os.environ.get("WAYPOST_DEBUG"):
            raise
        report_error({"code": "unexpected", "message": f"{type(exc).__name__}: {exc}",
                      "hint": "set WAYPOST_DEBUG=1 for the traceback"}, as_json)
        return 1
    return 0


def _click_outcome(exc: Exception, as_json: bool) -> int | None:
    """The exit code of what click raised (a usage error, --help or --version, an abort),
    reported as click reports it (or as an error document with --json); None for anything
    else. Only a command line that went through click can raise these, so click is loaded
    then and never for that reason alone."""
    from waypost.cli.context import echo

    click = sys.modules.get("click")
    if click is None:
        return None
    if isinstance(exc, click.exceptions.Exit):
        return int(exc.exit_code)
    if isinstance(exc, click.Abort):
        echo("aborted", err=True)
        return 1
    if isinstance(exc, click.ClickException):
        if as_json:
            command = getattr(getattr(exc, "ctx", None), "command_path", None) or "waypost"
            report_error({"code": "usage", "message": exc.format_message(),
                          "hint": f"see: {command} --help"}, True)
        else:
            exc.show()
        return int(exc.exit_code)
    return None


def report_error(error: dict[str, Any], as_json: bool) -> None:
    from waypost.cli.context import echo
    from waypost.model import to_json

    if as_json:
        echo(to_json({"error": error}).decode(), err=True)
        return
    from waypost.display import printable

    echo(f"waypost: {printable(error['message'])}", err=True)
    if error.get("hint"):
        echo(f"  next: {printable(error['hint'])}", err=True)


class _ClosedPipeFlush:
    """A standard stream whose flush ignores a closed pipe, so the interpreter's last
    flush at exit prints no traceback (what click does for the commands it runs)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def flush(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _ignore_closed_pipes() -> None:
    sys.stdout = cast(TextIO, _ClosedPipeFlush(sys.stdout))
    sys.stderr = cast(TextIO, _ClosedPipeFlush(sys.stderr))
