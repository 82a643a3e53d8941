"""The click command tree: every verb's options, `--help` and click's parsing.

Loaded only for command lines the fast path (`waypost.cli.hot`) leaves to click (every verb
but a plainly written hot one), so the hot verbs never pay for click. The hot verbs'
commands are built here from their declarations in `waypost.cli.hot`.
"""

from __future__ import annotations

from typing import Any

import click

from waypost.cli import lifecycle, outputs
from waypost.cli.context import Verb, invoke
from waypost.cli.hot import HOT

# Verbs that live in their own modules, imported only when called (or listed by --help), so
# the hot verbs never pay for them. Each feature area adds its line here.
LAZY_COMMANDS: dict[str, str] = {
    "demo": "waypost.cli.demo:demo",
    "doctor": "waypost.cli.ops:doctor",
    "limits": "waypost.cli.limits:limits",
    "migrate": "waypost.cli.ops:migrate",
    "review": "waypost.cli.review:review",
    "approve": "waypost.cli.review:approve",
    "gate": "waypost.cli.gates:gate_group",
    "deliver": "waypost.cli.delivery:deliver",
    "scan": "waypost.cli.review:scan",
    "inbox": "waypost.cli.review:inbox",
    "watch": "waypost.cli.watch:watch",
    "resume": "waypost.cli.watch:resume",
    "retarget": "waypost.cli.retarget:retarget",
    "prune": "waypost.cli.watch:prune",
    "mcp": "waypost.cli.mcp:mcp",
    "serve": "waypost.cli.serve:serve",
    "hooks": "waypost.cli.hosts:hooks_group",
    "token": "waypost.cli.tokens:token_group",
    "wait": "waypost.cli.wait:wait",
    "export": "waypost.cli.bundle:export",
    "verify-bundle": "waypost.cli.bundle:verify_bundle",
    "import": "waypost.cli.bundle:import_run",
    "keys": "waypost.cli.bundle:keys_group",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            import importlib

            module, _, attr = LAZY_COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


def hot_command(hot: Verb) -> click.Command:
    """A click command built from a hot verb's declaration."""

    def callback(**values: Any) -> None:
        invoke(hot.run, values)

    params: list[click.Parameter] = [a.argument() for a in hot.args]
    params.extend(o.option() for o in hot.options)
    return click.Command(hot.name, callback=callback, params=params, help=hot.run.__doc__)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="waypost")
def cli() -> None:
    """Checkpoint packets for long-running agent work.

    \b
    A typical run:
      RUN=$(waypost start "Fix the flaky test" --as alice --target file:result.md \\
            --kind long_running --max-silence 30m)
      waypost claim $RUN --as worker-1
      waypost heartbeat $RUN --as worker-1 --note "reproduced" --progress 0.3
      waypost evidence run $RUN --as worker-1 --kind test -- python3 -m unittest -q
      waypost artifact add $RUN report.md --role report --as worker-1
      waypost ready $RUN --as worker-1 --summary "fixed" --artifact report.md
      waypost review $RUN --as alice
      waypost approve $RUN --as alice
      waypost deliver --once
      waypost show $RUN

    --as ACTOR (else WAYPOST_ACTOR, else your user name) says who acts, and the rules are
    written in actors: only the owner approves, only the lease holder writes as the worker.
    A local store trusts --as, as git trusts a commit's author: anyone who can write the
    store can act as anyone. Over HTTP (waypost serve) the actor is the holder of the
    request's bearer token (waypost token issue).
    """


for hot in HOT.values():
    cli.add_command(hot_command(hot))
for command in (*lifecycle.COMMANDS, *outputs.COMMANDS):
    cli.add_command(command)


def run_click(args: list[str]) -> int:
    """Run a command line through click; what click raises (usage errors, help, --version,
    an abort) is mapped to exit codes with every other error, in `waypost.cli.main`."""
    # without standalone mode, click returns (not raises) the code of a verb's Exit
    code = cli.main(args=args, prog_name="waypost", standalone_mode=False)
    return code if isinstance(code, int) else 0
