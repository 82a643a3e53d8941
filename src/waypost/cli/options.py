"""Options as data: a verb's arguments and options, declared once.

The click commands are built from these declarations, so `--help` and click's own parsing
stay the reference. `parse` reads the same declarations to run a hot verb without loading
click, and accepts only a strict subset of what click accepts: the positional arguments,
`--name VALUE`, `--name=VALUE`, flags, and environment variables of single-valued options.
Anything else (a help flag, an unknown or repeated option, a value that begins with `-` or
does not convert, a missing argument) is answered with None: click then parses the
command line itself and reports any error in its own words.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

if TYPE_CHECKING:
    import click

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
        except ValueError:
            return _INVALID


def _checked(convert: Callable[[str], Any], metavar: str | None) -> click.ParamType[Any]:
    """A click type that converts with `convert`, refusing in its words (exit 2)."""
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
