"""Topology queries by rank: the NIC ports a set of GPUs reaches the network through."""

from __future__ import annotations

from atpsim.topology.queries import nic_ports
from atpsim.topology.spec import load_topology


def test_nic_ports_are_each_gpus_nic_to_switch_cables_once_in_rank_order():
    """ib-cluster:2x8: each GPU its own NIC (GPU 8 is node 1's first), every NIC under leaf0;
    listed in the order of the ranks given."""
    topology = load_topology("ib-cluster:2x8")
    assert nic_ports(topology, [0, 1, 8]) == [("node0_nic0", "leaf0"), ("node0_nic1", "leaf0"),
                                              ("node1_nic0", "leaf0")]  # fmt: skip
    assert nic_ports(topology, [8, 0]) == [("node1_nic0", "leaf0"), ("node0_nic0", "leaf0")]


def test_a_machine_without_nics_has_no_ports():
    assert nic_ports(load_topology("dgx-a100"), range(8)) == []
