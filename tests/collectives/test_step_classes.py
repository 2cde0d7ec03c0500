"""The hop class of NCCL's per-step latency, worked out on arrays (atpsim.collectives.channels.
pair_class_codes, atpsim.collectives.nccl.latency.step_classes): every pair classified as the
router says pair by pair, and every step at its slowest pair's class."""

import pytest

from atpsim.collectives.channels import PCIE_KINDS, group_layout, pair_classes
from atpsim.collectives.nccl import NcclPlanner
from atpsim.collectives.nccl.latency import step_classes
from atpsim.collectives.registry import pattern
from atpsim.topology.spec import load_topology

FABRICS = ["ic1", "ic2", "ic4", "dgx-a100", "ib-cluster:2x8,nics_per_node=4",
           "ib-cluster:4x4,intra=nvlink-mesh", "nvlink-pairs:8", "pcie-tree:8", "torus:4x4"]


def routed_class(topology, group, a, b):
    """One pair's class from its route, one router call: the definition."""
    layout = group_layout(topology, group)
    if layout.node[a] != layout.node[b]:
        return "net"
    kinds = topology.links.kind
    route = topology.route(group[a], group[b])
    return "pcie" if any(kinds[link] in PCIE_KINDS for link in route) else "nvlink"


@pytest.mark.parametrize("spec", FABRICS)
def test_every_pair_is_classed_as_its_route_says(spec):
    topology = load_topology(spec)
    group = list(range(topology.n_gpus - 1, -1, -1))  # reversed: local positions are not ranks
    pairs = [(a, b) for a in range(len(group)) for b in range(len(group)) if a != b]
    assert pair_classes(topology, group, pairs) == [routed_class(topology, group, a, b)
                                                    for a, b in pairs]


def test_the_three_classes_where_they_are_known():
    """IC1 stages NVLink-less copies through host memory (PCIe); IC2's NVLink pairs (0, 1)
    bridge directly; IC4's nodes hold 4 GPUs, so GPU 0 to GPU 4 crosses the network."""
    assert pair_classes(load_topology("ic1"), list(range(8)), [(0, 1)]) == ["pcie"]
    assert pair_classes(load_topology("ic2"), list(range(8)), [(0, 1), (0, 2)]) == ["nvlink", "pcie"]
    assert pair_classes(load_topology("ic4"), list(range(16)), [(0, 1), (0, 4)]) == ["nvlink", "net"]
    assert pair_classes(load_topology("ic1"), list(range(8)), []) == []


def test_a_fabric_without_pcie_links_is_not_routed(monkeypatch):
    """A torus has no PCIe, host or socket link: every pair inside its one node is 'nvlink'
    without routing a pair (routing 65,536 x 32 pairs one by one took most of a torus
    all-reduce's time with a protocol)."""
    def refuse(*args, **kwargs):
        raise AssertionError("routed")

    topology = load_topology("torus:8x8")
    monkeypatch.setattr(topology, "route", refuse)
    planner = NcclPlanner(topology, "all_reduce", [list(range(64))])
    assert step_classes(topology, "all_reduce", planner.plan("rabenseifner"),
                        [list(range(64))]) == ["nvlink"] * 12
    ic2 = load_topology("ic2")
    monkeypatch.setattr(ic2, "route", refuse)
    with pytest.raises(AssertionError, match="routed"):  # the check itself can fail
        pair_classes(ic2, list(range(8)), [(0, 1)])


@pytest.mark.parametrize("spec, op, algorithm", [
    ("ic2", "all_reduce", "rabenseifner"),
    ("ic1", "all_to_all", "pairwise"),
    ("ib-cluster:2x8,nics_per_node=4", "all_to_all", "pairwise"),
    ("ib-cluster:2x8,nics_per_node=4", "all_reduce", "rabenseifner"),
    ("ic4", "all_gather", "rabenseifner"),
])
def test_each_step_takes_its_slowest_pair(spec, op, algorithm):
    topology = load_topology(spec)
    group = list(range(topology.n_gpus))
    order = ["nvlink", "pcie", "net"]
    expected = []
    for s in pattern(op, algorithm, len(group), 1.0):
        found = [routed_class(topology, group, int(a), int(b))
                 for a, b in zip(s.src, s.dst, strict=True)]
        expected.append(max(found, key=order.index) if found else "nvlink")
    plan = NcclPlanner(topology, op, [group]).plan(algorithm)
    assert step_classes(topology, op, plan, [group]) == expected


def test_steps_of_different_classes():
    """Rabenseifner's reduce-scatter halves at distance 1, 2, 4, ...: on two 8-GPU nodes only
    the last step (distance 8) crosses the network; on IC2 the first step stays within the
    NVLink pairs and the next ones cross PCIe."""
    for spec, expected in [("ib-cluster:2x8,nics_per_node=4", ["nvlink"] * 3 + ["net"]),
                           ("ic2", ["nvlink", "pcie", "pcie"])]:
        topology = load_topology(spec)
        group = list(range(topology.n_gpus))
        plan = NcclPlanner(topology, "reduce_scatter", [group]).plan("rabenseifner")
        assert step_classes(topology, "reduce_scatter", plan, [group]) == expected
