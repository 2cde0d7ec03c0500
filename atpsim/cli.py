"""The ``atpsim`` command line: a thin click group; each command lives in atpsim/commands/."""

from __future__ import annotations

import importlib

import click

from atpsim import __version__

#: command module -> attribute holding the click command (each module owns one command).
COMMAND_MODULES = ("run", "topo", "collective", "hcm", "plan", "report", "validate")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="atpsim")
def main() -> None:
    """Simulate adaptive tensor parallelism (ATP) on GPU interconnects."""


for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"atpsim.commands.{_name}")
    main.add_command(_module.command)
