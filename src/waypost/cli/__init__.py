"""The `waypost` executable: a thin adapter over the library.

    __init__.py  `main(argv)`: runs a command line; the one error → exit code map
    entry.py     start-up work before anything loads (the console script's `main`)
    context.py   what every verb shares: store, actor, output, the common options
    options.py   options as data, parsed without click for the hot verbs
    hot.py       heartbeat, show, block, ls: run without click
    app.py       the click command tree (every other verb, and --help)
    lifecycle.py outputs.py review.py delivery.py watch.py ops.py demo.py: the verbs
    render.py    the packet, the board and the log as text and Markdown

Every verb takes --json (one document on stdout; errors as {"error": {...}} on stderr),
--store (or WAYPOST_URL) and --as (or WAYPOST_ACTOR). Exit codes: 0 ok, 1 unexpected,
2 usage or bad input, 3 refused by the rules, 4 not found, 5 conflict, 75 nothing was
written, try again (the store is busy, or the disk is full).

Importing this package loads nothing but the exceptions: a hot verb's process readies
itself first (`entry`), then `main` loads what it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from waypost.errors import WaypostError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, fast: bool = True) -> int:
    """Run the CLI; returns the exit code (every error mapped here, click's included).
    `fast=False` sends every command line through click, as any the fast path does not
    understand is."""
    # here, not at the top: the entry readies a hot verb's process before these load
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
        report_error(exc.as_dict(), as_json)
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


def report_error(error: dict[str, str], as_json: bool) -> None:
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
