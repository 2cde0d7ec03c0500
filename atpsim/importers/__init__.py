"""Importers: a framework's description of a training run as an atpsim job scenario.

``atpsim import KIND INPUT`` (:mod:`atpsim.commands.import_cmd`) and
:func:`atpsim.api.import_job` read one of these kinds of input, each a module here:

- ``megatron``: a Megatron-LM launch script or argument file (:mod:`.megatron`);
- ``nemo``: a NeMo (or Megatron-Bridge) recipe YAML (:mod:`.nemo`);
- ``deepspeed``: a DeepSpeed JSON config, with the model named apart (:mod:`.deepspeed`);
- ``hf``: a Hugging Face ``config.json`` for the model's shape (:mod:`.hf`).

Each returns an :class:`~atpsim.importers.trace.ImportedJob` whose every value is traced to
the input line (or the option, or the framework's default) it came from; the YAML writer
(:mod:`.writer`) puts those origins beside the values as comments.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from atpsim.errors import AtpsimError, did_you_mean

#: kind -> (module in atpsim.importers, its import function, what it reads).
IMPORTERS: dict[str, tuple[str, str, str]] = {
    "megatron": ("megatron", "import_megatron", "a Megatron-LM launch script or argument file"),
    "nemo": ("nemo", "import_nemo", "a NeMo / Megatron-Bridge recipe YAML"),
    "deepspeed": ("deepspeed", "import_deepspeed", "a DeepSpeed JSON config (its model named apart)"),
    "hf": ("hf", "import_hf", "a Hugging Face config.json"),
}


def importer_kinds() -> list[str]:
    """The kinds of input ``atpsim import`` reads."""
    return list(IMPORTERS)


def importer(kind: str) -> tuple[Callable[..., Any], frozenset[str]]:
    """The import function of *kind* and the options it takes (an unknown kind is an
    :class:`AtpsimError` naming the nearest)."""
    if kind not in IMPORTERS:
        raise AtpsimError(f"unknown kind of input {kind!r}{did_you_mean(kind, IMPORTERS)}",
                          param="kind")  # fmt: skip
    module_name, function, _ = IMPORTERS[kind]
    module = importlib.import_module(f"atpsim.importers.{module_name}")
    return getattr(module, function), module.OPTIONS


def describe_input(kind: str) -> str:
    """What *kind* reads, in a few words."""
    return IMPORTERS[kind][2]

