"""A scenario's topologies built at its device counts, and the :class:`ScenarioError` that
names a scenario key: what the plain sweep (:mod:`atpsim.scenario.sweep`) and the job sweep
(:mod:`atpsim.scenario.job_sweep`) share."""

from __future__ import annotations

from atpsim.errors import AtpsimError, ScenarioError
from atpsim.scenario.schema import Scenario
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology


def scenario_error(scenario: Scenario, message: str, *loc: str | int) -> ScenarioError:
    """A :class:`ScenarioError` of *message* at the key path *loc* of *scenario* (inside its
    case, for a case of a scenario with ``cases``) and naming its file."""
    return ScenarioError(message, source=scenario.source, key=scenario.key_path(*loc) or None)


def build_topology(scenario: Scenario, index: int, n_gpus: int | None) -> Topology:
    """Topology *index* of *scenario* sized to *n_gpus*; a :class:`TopologyError` becomes a
    :class:`ScenarioError` at key ``topology`` (the topology's own file and key inside)."""
    entry = scenario.topologies[index]
    try:
        return load_topology(entry.spec_mapping(), n_gpus=n_gpus)
    except AtpsimError as error:
        if error.source is None and error.key and error.key in entry.params:
            raise scenario_error(scenario, error.message, "topology", index, error.key) from None
        raise scenario_error(scenario, error.format(), "topology", index) from None


def sized_topologies(scenario: Scenario, index: int) -> list[tuple[int, int, Topology]]:
    """(position in devices, device count, topology) for each device count of the scenario,
    checking the topology has enough GPUs; the topology's own count when none is given."""
    devices = scenario.parallelism.devices
    if devices is None:
        topology = build_topology(scenario, index, None)
        return [(0, topology.n_gpus, topology)]
    sized = []
    for position, count in enumerate(devices):
        topology = build_topology(scenario, index, count)
        if topology.n_gpus < count:
            label = scenario.topologies[index].label()
            message = (
                f"{count} devices, but topology {label!r} has {topology.n_gpus} GPUs; "
                f"expected at most {topology.n_gpus}"
            )
            raise scenario_error(scenario, message, "parallelism", "devices", position)
        sized.append((position, count, topology))
    return sized
