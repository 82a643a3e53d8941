"""What every verb shares: its context (store, actor, output mode), printing, and its
options (--json, --store, --as; --epoch for a worker's writes), each declared once as data.

The click commands are built from those declarations, so `--help` and click's own parsing
stay the reference. `parse` reads the same declarations to run a hot verb without loading
click, and accepts only a strict subset of what click accepts: the positional arguments,
`--name VALUE`, `--name=VALUE`, flags, and environment variables of single-valued options.
Anything else (a help flag, an unknown or repeated option, a value that begins with `-` or
does not convert, a missing argument) is answered with None: click then parses the
command line itself and reports any error in its own words.
"""

from __future__ import annotations

import codecs
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO, TypeVar, cast

import msgspec

from waypost import inputs
from waypost.durations import parse_duration
from waypost.errors import InvalidInput
from waypost.model import to_json
from waypost.store import Store, open_store

if TYPE_CHECKING:
    import threading
    from types import FrameType

    import click

    from waypost.config import Config
    from waypost.usecases.runs import Run

F = TypeVar("F", bound=Callable[..., Any])
_INVALID = object()


class Opt(msgspec.Struct, frozen=True, kw_only=True):
    """One `--name` option."""

    name: str  # e.g. "--note"
    dest: str  # the keyword the verb receives
    help: str | None = None
    metavar: str | None = None
    # str, int, or a converter that raises ValueError saying what it wants (`waypost.inputs`)
    type: Callable[[str], Any] = str
    flag: bool = False  # present or not; takes no value
    choices: tuple[str, ...] = ()
    required: bool = False
    multiple: bool = False
    default: Any = None
    show_default: bool = False
    envvar: str | None = None  # read when the option is not given

    def click_attrs(self) -> dict[str, Any]:
        import click

        attrs: dict[str, Any] = {"help": self.help, "metavar": self.metavar,
                                 "required": self.required, "multiple": self.multiple,
                                 "envvar": self.envvar}
        if self.flag:
            attrs["is_flag"] = True
        elif self.choices:
            attrs["type"] = click.Choice(list(self.choices))
        elif self.type is int:
            attrs["type"] = int
        elif self.type is not str:
            attrs["type"] = _checked(self.type, self.metavar)
        if self.default is not None:
            attrs.update(default=self.default, show_default=self.show_default)
        return attrs

    def option(self) -> click.Option:
        import click

        return click.Option([self.name, self.dest], **self.click_attrs())

    def decorate(self, func: F) -> F:
        """Add this option to a click command function (as `@click.option` does)."""
        import click

        return click.option(self.name, self.dest, **self.click_attrs())(func)

    def convert(self, value: str) -> Any:
        """The value as click would pass it, or _INVALID where click would refuse it."""
        if self.choices:
            return value if value in self.choices else _INVALID
        try:
            return self.type(value)
        except (ValueError, InvalidInput):
            return _INVALID


def _checked(convert: Callable[[str], Any], metavar: str | None) -> click.ParamType[Any]:
    """A click type that converts with `convert`, refusing in its words (exit 2): a
    ValueError as click's usage error, an InvalidInput (a parser of `waypost.inputs`,
    which every door shares) as itself."""
    import click

    class Checked(click.ParamType[Any]):
        name = metavar or "VALUE"

        def convert(self, value: Any, param: click.Parameter | None,
                    ctx: click.Context | None) -> Any:
            try:
                return convert(str(value))
            except ValueError as exc:
                self.fail(str(exc), param, ctx)

    return Checked()


class Arg(msgspec.Struct, frozen=True, kw_only=True):
    """One required positional argument."""

    dest: str
    metavar: str

    def argument(self) -> click.Argument:
        import click

        return click.Argument([self.dest], metavar=self.metavar)


class Verb(msgspec.Struct, frozen=True, kw_only=True):
    """A command: its function, and what it takes, in `--help` order."""

    name: str
    run: Callable[..., None]
    args: tuple[Arg, ...] = ()
    options: tuple[Opt, ...] = ()


def parse(verb: Verb, argv: Sequence[str],
          environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """The verb's keyword values from `argv` (what follows the verb's name), or None when
    `argv` is not in the subset this parser fully understands."""
    read = _read(verb, argv)
    if read is None or len(read[1]) != len(verb.args):
        return None
    given, positional = read
    values: dict[str, Any] = {a.dest: v for a, v in zip(verb.args, positional, strict=True)}
    for opt in verb.options:
        value = _value(opt, given.get(opt.dest), environ)
        if value is _INVALID:
            return None
        values[opt.dest] = value
    return values


def _read(verb: Verb, argv: Sequence[str]) -> tuple[dict[str, list[Any]], list[str]] | None:
    """The options' converted values by dest, and the positional arguments."""
    by_name = {o.name: o for o in verb.options}
    given: dict[str, list[Any]] = {}
    positional: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-"):
            positional.append(token)
            continue
        name, eq, inline = token.partition("=")
        opt = by_name.get(name)
        if opt is None or (opt.dest in given and not opt.multiple) or (opt.flag and eq):
            return None
        if opt.flag:
            given[opt.dest] = [True]
            continue
        value = inline if eq else next(tokens, None)
        if value is None or (not eq and value.startswith("-")):
            return None
        converted = opt.convert(value)
        if converted is _INVALID:
            return None
        given.setdefault(opt.dest, []).append(converted)
    return given, positional


def _value(opt: Opt, given: list[Any] | None, environ: Mapping[str, str]) -> Any:
    """What the verb receives for `opt`: the command line, else the environment (an empty
    variable counts as unset, as in click), else the default."""
    if given is not None:
        return tuple(given) if opt.multiple else given[0]
    from_env = environ.get(opt.envvar) if opt.envvar else None
    if from_env:
        return _INVALID if opt.flag or opt.multiple else opt.convert(from_env)
    if opt.required:
        return _INVALID
    if opt.flag:
        return False
    return () if opt.multiple else opt.default


# --- the context ------------------------------------------------------------------------
class Caller(NamedTuple):
    """Who the refused command acted as, by name, on which run, with which epoch."""

    actor: str
    run: str
    epoch: int | None


CALLER: ContextVar[Caller | None] = ContextVar("waypost_cli_caller", default=None)


class Ctx:
    """What every verb gets: the store (opened lazily), the actor, the output mode."""

    def __init__(self, store_url: str | None, actor: str | None, as_json: bool) -> None:
        self.store_url = store_url
        if actor is not None:  # given, even empty: an empty --as is refused, not a default
            self.actor = inputs.name(actor, "--as")
        elif os.environ.get("WAYPOST_ACTOR") is not None:
            self.actor = inputs.name(os.environ["WAYPOST_ACTOR"], "WAYPOST_ACTOR")
        else:
            self.actor = _user_name()
        self.fell_back = actor is None and os.environ.get("WAYPOST_ACTOR") is None
        self.named = not self.fell_back  # the actor was named (--as, WAYPOST_ACTOR)
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

    def acting(self) -> str:
        """The actor of a write; a fallback to the user's name is said on stderr, once."""
        if self.fell_back:
            from waypost.usecases.commands import fallback_notice

            echo(fallback_notice(self.actor), err=True)
            self.fell_back = False
        return self.actor

    def run(self, run_id: str, epoch: int | None = None, *, writes: bool = True) -> Run:
        from waypost.usecases.runs import Run

        if writes:
            self.acting()
        if epoch is None and os.environ.get("WAYPOST_EPOCH"):
            epoch = inputs.epoch(os.environ["WAYPOST_EPOCH"], "WAYPOST_EPOCH")
        if self.named:  # a refusal's next steps are then written for this caller
            CALLER.set(Caller(actor=self.actor, run=run_id, epoch=epoch))
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
EPOCH = Opt(name="--epoch", dest="epoch", type=functools.partial(inputs.epoch, field="--epoch"),
            metavar="INTEGER", envvar="WAYPOST_EPOCH",
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


def reviewed_option(func: F) -> F:
    """--reviewed DIGEST: the answer binds to the result it names (`usecases.approval`)."""
    import click

    return click.option(
        "--reviewed", metavar="DIGEST",
        help="The digest of the result you answer, as `waypost review` prints it (reviewed "
             "result: sha256:…; also shown by `waypost show`, the board and the notices): "
             "refused, saying what changed, if the result has changed since. Without it, "
             "the result as it stands is answered.")(func)


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
