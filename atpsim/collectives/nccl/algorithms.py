"""The algorithm names NCCL runs per op, their checks, and what its tuner chooses among.

Listed here, beside the collectives, so that scenarios and the planner can list and check the
names without the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from atpsim.collectives.channels import RING_STEPS, group_layout
from atpsim.collectives.nvls import NVLS_OPS, has_nvls
from atpsim.collectives.registry import algorithm_names, default_algorithm
from atpsim.errors import SimulationError, did_you_mean, param
from atpsim.topology.graph import Topology

#: Algorithms NCCL's planning lays out itself (everything else is a registry name run as is):
#: ``ring`` = NCCL's channel rings (one per NIC, :mod:`atpsim.collectives.channels`);
#: ``ring-rank-order`` = one ring in the group's order (the registry's plain ``ring``);
#: ``hierarchical`` = intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather
#: (:mod:`atpsim.collectives.hierarchical`); ``tree`` = NCCL's double binary tree across nodes,
#: chains inside (:mod:`atpsim.collectives.tree`); ``nvls`` = NVLink SHARP on NVSwitch machines
#: that have it (:mod:`atpsim.collectives.nvls`: all-reduce, reduce-scatter and all-gather, with
#: Simple only); ``hierarchical`` and ``tree`` are all-reduce only; ``auto`` = what NCCL's tuner
#: picks (:func:`auto_algorithms`, the fastest by this model).
NCCL_ALGORITHMS = ("ring", "ring-rank-order", "hierarchical", "tree", "nvls", "auto")
#: What ``auto`` chooses among, per op.
AUTO_CANDIDATES = {"all_reduce": ("ring",), "reduce_scatter": ("ring",), "all_gather": ("ring",)}


def nccl_algorithm_names(op: str) -> list[str]:
    """Algorithm names NCCL's planning takes for *op*: its own and the registry's."""
    own = [a for a in NCCL_ALGORITHMS
           if (a != "ring" or op in RING_STEPS) and (a not in ("hierarchical", "tree") or op == "all_reduce")
           and (a != "nvls" or op in NVLS_OPS)]
    return sorted(set(own) | set(algorithm_names(op)))


def check_nccl_algorithm(op: str, algorithm: str, key: str | None = None) -> None:
    """A SimulationError (at *key*, else about the *algorithm* parameter) naming the nearest valid name when NCCL's planning does
    not take *algorithm* for *op*."""
    if algorithm not in nccl_algorithm_names(op):
        valid = nccl_algorithm_names(op)
        raise SimulationError(f"unknown algorithm {algorithm!r} for {op}"
                              f"{did_you_mean(algorithm, valid)}", key=key, param="algorithm")


def channel_algorithms(op: str) -> tuple[str, ...]:
    """The algorithms of *op* that run on channels (:mod:`atpsim.collectives.channels`):
    NCCL's channel rings where *op* has ring steps, the double binary tree (one tree pair per
    channel) for an all-reduce, and ``auto``, which may pick either. Every other algorithm
    runs one channel."""
    if op not in RING_STEPS:
        return ()
    return ("ring", "tree", "auto") if op == "all_reduce" else ("ring", "auto")


def check_channels_used(op: str, algorithm: str, channels: int | None) -> None:
    """A SimulationError about the *channels* parameter when it is given for an *algorithm*
    that runs one channel (:func:`channel_algorithms`), rather than dropping it silently."""
    if channels is None or algorithm in channel_algorithms(op):
        return
    takes = channel_algorithms(op)
    leave = f"leave {param('channels')} out"
    expected = f"expected the algorithm {', '.join(takes[:-1])} or {takes[-1]}, or {leave}" \
        if takes else f"no {op} algorithm runs on channels: {leave}"
    raise SimulationError(f"does nothing for {algorithm} ({op} by {algorithm} runs one channel); "
                          f"{expected}", param="channels")  # fmt: skip


def auto_algorithms(topology: Topology, op: str, groups: Sequence[Sequence[int]]) -> tuple[str, ...]:
    """What ``auto`` chooses among: :data:`AUTO_CANDIDATES`, plus the tree for an all-reduce
    across nodes and NVLS for an all-reduce, reduce-scatter or all-gather inside one node of an
    NVSwitch that reduces (NCCL's tuner weighs the same: ring, tree, NVLS)."""
    base = AUTO_CANDIDATES.get(op, (default_algorithm(op),))
    if op not in NVLS_OPS:
        return base
    if not one_node_each(topology, groups):
        return (*base, "tree") if op == "all_reduce" else base
    return (*base, "nvls") if has_nvls(topology) else base


def one_node_each(topology: Topology, groups: Sequence[Sequence[int]]) -> bool:
    """Whether every group of more than one rank sits on one node."""
    return all(group_layout(topology, g).n_nodes == 1 for g in groups if len(g) > 1)


def check_nvls(topology: Topology, groups: Sequence[Sequence[int]]) -> None:
    """NVLS needs an NVSwitch with NVLink SHARP (H100 and later) and each group on one node."""
    if not has_nvls(topology):
        raise SimulationError(f"NVLS needs an NVSwitch with NVLink SHARP (H100 or later); "
                              f"{topology.name} has none", param="algorithm")
    if not one_node_each(topology, groups):
        raise SimulationError("NVLS reduces inside one NVSwitch node; a group spans nodes",
                              param="algorithm")
