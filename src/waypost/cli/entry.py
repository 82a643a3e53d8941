"""The `waypost` executable: start-up work that must happen before the CLI loads.

A hot verb (heartbeat, show, block, ls) is a process that does one thing and exits, run
between every step of an agent's work, so it starts as light as it can:

- msgspec imports typing_extensions whenever it is installed (httpx brings it in, so every
  install has it), only for its versions of `get_type_hints`, `Required` and `NotRequired`,
  and uses `typing`'s when it is absent. waypost's records use nothing from it, and
  importing it (with `inspect`, `ast` and `dis` behind it) costs ~9 ms, a sixth of a
  heartbeat. So it is hidden while msgspec loads, and imports normally afterwards.
- No cyclic garbage collection (see `main`), and events are hashed with Python's own
  SHA-256, sparing the load of OpenSSL (`waypost.core.digest.prefer_quick_start`).
- No interpreter teardown: once the verb has closed its store and its output is flushed,
  the process ends at once (`exit_now`), sparing the ~4 ms of unloading every module.

Every other command, and any program that imports waypost as a library, starts as usual.
"""

import gc
import os
import sys

# `waypost.cli.hot.HOT`; a test keeps them equal
HOT_VERBS = ("heartbeat", "show", "block", "ls", "hook")
HASHING = ("heartbeat", "block")  # the hot verbs that write, so hash an event; reads never do


def main() -> int:
    one_shot = len(sys.argv) > 1 and sys.argv[1] in HOT_VERBS
    if one_shot:
        # No cyclic garbage collection: ~17 collections ran while a heartbeat loaded its
        # modules (~3 ms), in a process that makes no garbage cycles worth freeing and exits.
        gc.disable()
        import_msgspec_without_typing_extensions()
        if sys.argv[1] in HASHING:
            from waypost.core import digest

            digest.prefer_quick_start()
    from waypost.cli import main as cli_main

    code = cli_main()
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


def import_msgspec_without_typing_extensions() -> None:
    """Import msgspec with typing_extensions hidden; a msgspec that cannot load without it
    is imported again as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # "import" refuses it
    try:
        import msgspec  # noqa: F401
    except ImportError:
        for name in [n for n in sys.modules if n.partition(".")[0] == "msgspec"]:
            del sys.modules[name]
    finally:
        del sys.modules["typing_extensions"]
