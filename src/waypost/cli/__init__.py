"""The `waypost` executable: a thin adapter over the library.

    entry.py     start-up work before anything loads (the console script's `main`)
    dispatch.py  `main(argv)`: runs a command line; the one error → exit code map
    context.py   what every verb shares: store, actor, output, the common options
    options.py   options as data, parsed without click for the hot verbs
    hot.py       heartbeat, show, block, ls: run without click
    app.py       the click command tree (every other verb, and --help)
    lifecycle.py outputs.py review.py delivery.py watch.py ops.py demo.py: the verbs
    render.py    the packet, the board and the log as text and Markdown

Every verb takes --json (one document on stdout; errors as {"error": {...}} on stderr),
--store (or WAYPOST_URL) and --as (or WAYPOST_ACTOR). Exit codes: 0 ok, 1 unexpected,
2 usage or bad input, 3 refused by the rules, 4 not found, 5 conflict.

Importing this package loads nothing: a hot verb's process readies itself first
(`entry`), then loads what it runs.
"""

import typing

if typing.TYPE_CHECKING:
    from waypost.cli.dispatch import main

__all__ = ["main"]


def __getattr__(name: str) -> object:
    if name != "main":
        raise AttributeError(f"module 'waypost.cli' has no attribute {name!r}")
    from waypost.cli.dispatch import main

    return main
