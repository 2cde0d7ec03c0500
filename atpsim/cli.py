"""The ``atpsim`` command line: a thin click group; each command lives in atpsim/commands/.

Commands are imported on first use, so ``atpsim topo show`` does not pay for the pandas and
matplotlib imports that ``atpsim run`` needs.
"""

from __future__ import annotations

import importlib

import click

from atpsim import __version__

#: command name -> module in atpsim.commands whose ``command`` attribute is the click command.
COMMAND_MODULES = {
    "topo": "topo",
    "collective": "collective",
    "hcm": "hcm",
    "plan": "plan",
    "run": "run",
    "report": "report",
    "validate": "validate",
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(f"atpsim.commands.{module_name}")
        command: click.Command = module.command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="atpsim")
def main() -> None:
    """Simulate adaptive tensor parallelism (ATP) on GPU interconnects."""
