"""`waypost hook EVENT --host HOST`: an agent host's hook, its JSON on stdin, the answer on
stdout in the host's own format. This door reads stdin, the environment and the store's
location, and writes the answer; the answer itself is `waypost.hooks.answer`'s, the same
one `POST /hooks/claude/{event}` gives.

Events: `stop` (Gemini CLI's `AfterAgent`) and `subagent-stop` refuse a stop while the run
has no result packet; `session-start` gives the agent the handoff brief of the session's
run (attaching the session to the run `WAYPOST_RUN` names) and the news of the inbox of
`WAYPOST_ACTOR` not yet shown ("while you were gone"), `user-prompt-submit` its one-line
status. Every failure of the hook's own is answered, exit 0, as a refusal whose
reason says what broke (as context at a session's start or a prompt): every host lets the
agent stop when a hook exits with any code but 0 and 2.

Run on every stop and prompt, so it stays a hot verb: no click, no HTTP, MCP or PostgreSQL
stack unless the store is one, and a bounded wait for a busy store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from waypost.cli.context import Ctx
from waypost.errors import InvalidInput
from waypost.hooks.answer import MAX_INPUT, Terms
from waypost.hooks.answer import answer as hook_answer

if TYPE_CHECKING:
    from waypost.store.base import Store

RUN_ENV: Final = "WAYPOST_RUN"  # a run a parent started for this session
INPUT_WAIT: Final = 5.0  # seconds the host's JSON may take to arrive in whole
HOOK_WAIT: Final = "5s"  # a busy store is waited for this long, unless WAYPOST_BUSY_TIMEOUT


def answer(ctx: Ctx, event: str, host: str, cap: int) -> None:
    """Answer the hook and print the host's answer; never raises (a failure is a refusal)."""
    terms = Terms(cap=cap, require_run=ctx.config.require_run,
                  named_run=os.environ.get(RUN_ENV, "").strip() or None, named_by=RUN_ENV,
                  reader=os.environ.get("WAYPOST_ACTOR", "").strip() or None)

    def store() -> Store | None:
        return None if ctx.store_url is None and _no_default_store() else ctx.store

    with bounded_wait():
        said = hook_answer(store, host, event, read_input, caller=None, terms=terms)
    # as bytes: JSON is UTF-8 whatever the locale says, and text a stream could not encode
    # must not end the hook with an error (which would let the agent stop)
    for stream, text in ((sys.stdout, said.out), (sys.stderr, said.log)):
        binary = getattr(stream, "buffer", None)  # none: a text-only stream (a test's capture)
        if not text:
            continue
        stream.flush()
        if binary is None:
            stream.write(text + "\n")
        else:
            binary.write(text.encode("utf-8", "backslashreplace") + b"\n")
        stream.flush()


def read_input(limit: int = MAX_INPUT, wait_s: float = INPUT_WAIT) -> bytes:
    """Standard input to its end: `limit` + 1 bytes at most (more is refused by the caller),
    and given up on when it stays open and silent for `wait_s`."""
    import select
    import time

    fd = sys.stdin.fileno()
    chunks: list[bytes] = []
    size, deadline = 0, time.monotonic() + wait_s
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise InvalidInput(f"the hook's input did not end within {wait_s:g} s")
        chunk = os.read(fd, min(1 << 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _no_default_store() -> bool:
    from waypost.store import find_default

    return find_default() is None


@contextlib.contextmanager
def bounded_wait() -> Iterator[None]:
    """Wait for a busy store `HOOK_WAIT` at most (unless WAYPOST_BUSY_TIMEOUT says), well
    below a host's hook timeout (Claude Code's: 60 s)."""
    from waypost.store.shared import BUSY_TIMEOUT_ENV

    if os.environ.get(BUSY_TIMEOUT_ENV):
        yield
        return
    os.environ[BUSY_TIMEOUT_ENV] = HOOK_WAIT
    try:
        yield
    finally:
        os.environ.pop(BUSY_TIMEOUT_ENV, None)
