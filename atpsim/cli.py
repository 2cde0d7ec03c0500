"""The ``atpsim`` command line: a thin click group; each command lives in atpsim/commands/.

Commands are imported on first use, so ``atpsim topo show`` does not pay for the pandas and
matplotlib imports that ``atpsim run`` needs.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import sys
from typing import Any

import click

from atpsim import __version__
from atpsim.commands._common import (
    EXIT_INTERRUPTED,
    check_environment,
    exit_codes_help,
    reader_gone,
)

#: command name -> module in atpsim.commands whose ``command`` attribute is the click command.
COMMAND_MODULES = {
    "topo": "topo",
    "collective": "collective",
    "hcm": "hcm",
    "plan": "plan",
    "run": "run",
    "search": "search",
    "report": "report",
    "validate": "validate",
    "import": "import_cmd",
}


#: Allocations between young collections for a command (CPython's default: 700). A job
#: simulation allocates millions of objects that live to its end (tasks, events, episodes)
#: and makes few reference cycles; at the default the collector made 10 full passes over
#: them in one 512-GPU job, 0.7-0.9 s of its 7.5 s, for no memory back (bench/README.md,
#: "the cyclic collector"). Every cycle is still collected, in passes ~14x fewer. A joint
#: run now pauses the collector itself (:mod:`atpsim.engine.joint.collector`); the threshold
#: still serves the rest (a command's imports, an isolated network's sweep, the report).
GC_YOUNG_THRESHOLD = 10_000


@functools.cache
def _freeze_at_exit() -> None:
    """At the process's exit, freeze what is alive out of the collector's reach, so the
    interpreter's last full pass does not walk it: that pass, over a job's modules (numba,
    matplotlib, pandas) and results, cost 0.5-0.7 s of CPU after the 512-H100 job's command
    had finished (0.7-0.95 s from its end to its exit, 0.2 s with the freeze; measured with
    ``resource.getrusage`` before exit against ``/usr/bin/time``, bench/README.md). Everything
    still gets freed as the modules are torn down; only cyclic garbage left at exit (none
    of ours holds a file open) goes unvisited, as it would with the process gone."""
    atexit.register(gc.freeze)


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is asked for, and
    whose usage errors (a bad option value, a missing argument) read as one line, exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        main: Any = super().main
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        _freeze_at_exit()
        if not kwargs.pop("standalone_mode", True):
            return main(*args, standalone_mode=False, **kwargs)
        try:
            result = main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:
            error.show()  # bare `atpsim` or `atpsim topo`: the help, as click prints it
            sys.exit(error.exit_code)
        except click.ClickException as error:
            ctx = getattr(error, "ctx", None)
            where = f"{ctx.command_path}: " if ctx else ""
            hint = f" (see '{ctx.command_path} --help')" if ctx else ""
            message = " ".join(error.format_message().split())
            click.echo(f"atpsim: error: {where}{message}{hint}", err=True)
            sys.exit(error.exit_code)
        except BrokenPipeError:
            reader_gone()
        except (click.Abort, KeyboardInterrupt):
            click.echo("atpsim: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        check_environment()
        module = importlib.import_module(f"atpsim.commands.{module_name}")
        command: click.Command = module.command
        _add_exit_codes(command)
        return command


def _add_exit_codes(command: click.Command) -> None:
    """Every command's ``--help`` ends with the exit statuses (a group's subcommands too)."""
    if not command.epilog:
        command.epilog = exit_codes_help()
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _add_exit_codes(sub)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_codes_help(),
)
@click.version_option(__version__, prog_name="atpsim")
def main() -> None:
    """Simulate adaptive tensor parallelism (ATP) on GPU interconnects."""
