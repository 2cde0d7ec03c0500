"""What a search announces before it runs (:mod:`atpsim.api.search`): the layouts it will
simulate and those it pruned (:func:`describe_search`), and the settings its space leaves to
their defaults (:func:`defaulted_settings`), printed at the top of its output."""

from __future__ import annotations

from typing import Any

from atpsim.compute.hardware import topology_hardware
from atpsim.parallel.partition import show_partition
from atpsim.scenario.lazy import LazyPoints
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import sized_topologies
from atpsim.training.defaults import model_vocab

#: The micro-batch sizes a search tries where its space names none (as ``plan --global-batch``).
DEFAULT_MICRO_BATCHES = (1, 2, 4)


def describe_search(space: Scenario, points: LazyPoints, max_tp: int) -> str:
    """What a search will simulate and what it pruned, a line each (what it announces)."""
    count = len(points)  # the first pass: it counts what it prunes
    pruned = ", ".join(f"{n:,} by {why}" for why, n in sorted(points.pruned.items())) or "none"
    par, given = space.parallelism, space.parallelism.model_fields_set
    lines = [f"search {space.name}: {count:,} layouts to simulate; pruned before "
             f"simulation: {pruned}"]  # fmt: skip
    axes = [("topology", ", ".join(e.label() for e in space.topologies)),
            ("model", ", ".join(e.config().name for e in space.models)),
            ("devices", _listed(par.devices) if par.devices else "all GPUs of the topology"),
            ("tp", "as listed" if "tp" in given else f"every mesh of 1 to {max_tp} GPUs"),
            ("pp", _listed(par.pp) if "pp" in given else
             "every divisor of the layers" + (" (every depth with auto)" if "auto" in par.partition else "")),
            ("micro_batch", _listed(par.micro_batch if "micro_batch" in given else DEFAULT_MICRO_BATCHES)),
            ("global_batch", _listed(par.global_batch)),
            ("network", _listed(par.network))]  # fmt: skip
    if "partition" in given:
        axes.insert(-1, ("partition", ", ".join(map(show_partition, par.partition))))
    if "cp" in given:
        axes.insert(-1, ("cp", _listed(par.cp)))
    if "ep" in given or any(e.config().is_moe for e in space.models):
        axes.insert(-1, ("ep", _listed(par.ep) if "ep" in given else "every divisor of the experts"))
    return "\n".join(lines + [f"  {name:<12} {values}" for name, values in axes])


def _listed(values: Any) -> str:
    return ", ".join(map(str, values))


#: The ``parallelism`` settings a search names where its space leaves them to their defaults.
DEFAULTED_SETTINGS = ("sequence_parallel", "recompute", "zero", "network", "schedule")


def defaulted_settings(space: Scenario) -> list[str]:
    """The settings *space* leaves to their defaults, one ``key value`` each (several values
    where its cases, topologies or models differ): the hardware (the topology's), the
    vocabulary (the model preset's) and :data:`DEFAULTED_SETTINGS` (what a search prints at
    the top of its output, so a row's numbers can be read against them)."""
    found: dict[str, dict[str, None]] = {}
    for part in space.parts():
        given = part.parallelism.model_fields_set
        if part.hardware is None:
            for index in range(len(part.topologies)):
                topology = sized_topologies(part, index)[0][2]
                hardware = topology_hardware(topology)
                found.setdefault("hardware", {})[f"{hardware} (the topology's)"] = None
        if part.parallelism.vocab is None:
            for entry in part.models:
                vocab = model_vocab(entry.config(), entry.preset)
                found.setdefault("vocab", {})[f"{vocab} ({entry.config().name}'s)"] = None
        for key in DEFAULTED_SETTINGS:
            if key not in given:
                for value in getattr(part.parallelism, key):
                    found.setdefault(key, {})[_yaml_word(value)] = None
    return [f"{key} {', '.join(values)}" for key, values in found.items()]


def _yaml_word(value: Any) -> str:
    """*value* as a scenario file writes it (``false``, ``1f1b``, ``0``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
