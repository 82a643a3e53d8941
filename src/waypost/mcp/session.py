"""What every tool shares: who acts, on which store, within which limits.

The acting party is the server's (`--as`, `WAYPOST_ACTOR`), never a tool argument: a tool
acts as the one actor the server was started for, with the lease epoch this server holds
on each run it started or resumed (so after another worker takes a run over, this
server's writes to it are refused as the CLI's would be). The store is opened for each
call (tools run in worker threads) and closed after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from waypost.config import Config
from waypost.runs import Run
from waypost.store import Store, open_store

DEFAULT_EVIDENCE_LIMIT = 20.0  # seconds: MCP hosts time a tool call out around 60 s


@dataclass
class Session:
    """What every tool shares: who acts, on which store, within which limits."""

    store_url: str | None
    actor: str
    config: Config
    evidence_limit: float = DEFAULT_EVIDENCE_LIMIT
    # the agent host's session (Claude Code passes CLAUDE_CODE_SESSION_ID to a stdio server,
    # read once at start: the variable is inherited), recorded on the runs this server starts
    # so that the host's hooks find the session's run
    host_session: str | None = None
    epochs: dict[str, int] = field(default_factory=dict)  # run → the lease epoch held here
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def store(self, *, create: bool = False) -> Iterator[Store]:
        store = open_store(self.store_url, create=create)
        try:
            yield store
        finally:
            store.close()

    def run(self, store: Store, run_id: str) -> Run:
        with self._lock:
            epoch = self.epochs.get(run_id)
        return Run(store, run_id, actor=self.actor, epoch=epoch)

    def hold(self, run: Run) -> None:
        """Remember the epoch `run` holds now (after start, claim or resume)."""
        if run.epoch is not None:
            with self._lock:
                self.epochs[run.id] = run.epoch
