"""What every verb shares: its context (store, actor, output mode), printing, and the
options every verb takes (--json, --store, --as; --epoch for a worker's writes).
"""

from __future__ import annotations

import codecs
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

from waypost.cli.options import Arg, Opt
from waypost.durations import parse_duration
from waypost.model import to_json
from waypost.store import Store, open_store

if TYPE_CHECKING:
    import threading
    from types import FrameType

    from waypost.config import Config
    from waypost.runs import Run

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    """What every verb gets: the store (opened lazily), the actor, the output mode."""

    def __init__(self, store_url: str | None, actor: str | None, as_json: bool) -> None:
        from waypost.inputs import name

        self.store_url = store_url
        if actor is not None:  # given, even empty: an empty --as is refused, not a default
            self.actor = name(actor, "--as")
        elif os.environ.get("WAYPOST_ACTOR") is not None:
            self.actor = name(os.environ["WAYPOST_ACTOR"], "WAYPOST_ACTOR")
        else:
            self.actor = _user_name()
        self.json = as_json
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            # read verbs never create a store: the first write does
            self._store = open_store(self.store_url, create=False)
        return self._store

    @functools.cached_property
    def config(self) -> Config:
        from waypost.config import load_config

        return load_config()

    def run(self, run_id: str, epoch: int | None = None) -> Run:
        from waypost.runs import Run

        if epoch is None and os.environ.get("WAYPOST_EPOCH"):
            epoch = int(os.environ["WAYPOST_EPOCH"])
        return Run(self.store, run_id, actor=self.actor, epoch=epoch)

    def emit(self, document: Any, text: str | Callable[[], str]) -> None:
        """The JSON document, exact; or the text (made only then, when given as a
        function), with no control character but the newline left in it (stored text is
        anyone's: it may not steer the terminal)."""
        if self.json:
            echo(to_json(document).decode())
        else:
            echo(_shown(text if isinstance(text, str) else text()))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _shown(text: str) -> str:
    """`text` with every control character but a newline made visible. Most lines are
    plain, and for those the escaping module is never loaded (the hot verbs' start-up)."""
    if text.isascii() and text.replace("\n", "").isprintable():
        return text
    from waypost.display import printable

    return printable(text, limit=None)


def _user_name() -> str:
    import getpass

    return getpass.getuser()


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print as `click.echo` does. Text for a UTF-8 text stream is written as is; anything
    click treats specially (ANSI codes it may strip, a stream it would re-wrap) goes to
    click itself."""
    stream = sys.stderr if err else sys.stdout
    if "\x1b" in text or not _plain_text_stream(stream):
        import click

        click.echo(text, err=err, nl=nl)
        return
    stream.write(text + "\n" if nl else text)
    stream.flush()


def _plain_text_stream(stream: TextIO | None) -> bool:
    """A UTF-8 text stream, which click.echo would write to as it is."""
    encoding = getattr(stream, "encoding", None)
    if (not isinstance(stream, io.TextIOBase) or not isinstance(encoding, str)
            or stream.errors is None or sys.platform == "win32"):
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def invoke(func: Callable[..., None], values: dict[str, Any]) -> None:
    """Run a verb: a Ctx made from the common options, then the verb's own values."""
    ctx = Ctx(values.pop("store_url"), values.pop("actor"), values.pop("as_json"))
    try:
        func(ctx, **values)
    finally:
        ctx.close()


# --- the options every verb takes -------------------------------------------------------

COMMON = (
    Opt(name="--json", dest="as_json", flag=True, help="Print one JSON document."),
    Opt(name="--store", dest="store_url", metavar="URL", envvar="WAYPOST_URL",
        help="Store URL or path [env WAYPOST_URL; default: .waypost/ found upward]."),
    Opt(name="--as", dest="actor", metavar="ACTOR",
        help="Who is acting [env WAYPOST_ACTOR; default: your user name]."),
)
EPOCH = Opt(name="--epoch", dest="epoch", type=int, envvar="WAYPOST_EPOCH",
            help="Your lease epoch from `claim` [env WAYPOST_EPOCH]; a stale one is refused.")
RUN = Arg(dest="run_id", metavar="RUN")


def verb(func: F) -> F:
    """Add --json, --store and --as to a click command and hand it a Ctx."""

    @functools.wraps(func)
    def wrapper(**values: Any) -> None:
        invoke(func, values)

    command: Callable[..., None] = wrapper
    for opt in reversed(COMMON):  # as stacked decorators, so --help lists them in order
        command = opt.decorate(command)
    return cast(F, command)


def epoch_option(func: F) -> F:
    return EPOCH.decorate(func)


def duration(value: str | None, flag: str, *, positive: bool = False) -> float | None:
    """A duration option's seconds (None when not given); a bad one is refused naming `flag`."""
    return None if value is None else parse_duration(value, flag, positive=positive)


@contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` while the block runs (a daemon verb finishes the work in
    hand, then exits); the previous handlers come back afterwards."""
    import signal  # here: only the daemon verbs need it

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
