"""IC1's calibrated link structure: per-GPU cross-socket lanes behind a shared socket bridge.

Golden numbers, with the rates of ``ic1_closed_form`` (bridge = 4 x 0.600, host staging =
6 x 2.475, lane = 14/8 x 0.485 GB/s, fp16 bytes/s; the paper's Section 5.3 values read with 4
bytes per element):

- DeviceMesh(2, 4), dimension 1: 4 pairs (i, i+4) across the sockets, 4 flows each way on the
  bridge, 2.4 / 4 = 0.6 GB/s per flow (below the 0.849 lane); a 2-GPU ring's algbw is its flow
  rate: B1 = 0.600 GB/s.
- DeviceMesh(2, 4), dimension 2: two 4-GPU rings inside the sockets; a socket's 4 flows share
  its host staging link, 14.85 / 4 = 3.7125 GB/s busbw; algbw = 4/6 of it: B2 = 2.475 GB/s.
- DeviceMesh(8, 1): one ring over all 8; its crossings 3 -> 4 and 7 -> 0 are alone on the
  bridge and bound by their lanes, 0.849 GB/s busbw; algbw = 8/14 of it: B1 = 0.485 GB/s.

Without lanes one socket link would give all of them the same aggregate: the single crossing
of the 8-GPU ring could not be slower than each of 4 concurrent pairs (paper: 0.97 x 14/8 =
1.7 GB/s busbw against 1.2 GB/s per pair, as printed).
"""

import pytest

from atpsim.calibrate.paper.parameters import ic1_closed_form
from atpsim.calibrate.paper.table3 import bandwidth_targets, simulate_bandwidths
from atpsim.topology.builders.pcie import pcie_tree


def _ic1(**rates):
    return pcie_tree(
        8,
        p2p=False,
        host_staging_bandwidth_Bps=rates["ic1_host_staging_Bps"],
        socket_bandwidth_Bps=rates["ic1_socket_bridge_Bps"],
        cross_socket_gpu_bandwidth_Bps=rates["ic1_cross_socket_gpu_Bps"],
    )


def test_closed_form_rates_reproduce_the_paper_bandwidths():
    simulated = simulate_bandwidths(_ic1(**ic1_closed_form()))
    for target in bandwidth_targets():
        assert simulated[target.name] == pytest.approx(target.target_Bps, rel=0.01), target.name


def test_cross_socket_traffic_takes_the_destination_gpus_lane():
    topo = _ic1(**ic1_closed_form())
    assert topo.route_nodes(3, 4) == [
        "gpu3", "pcie_switch1", "cpu0", "host_mem0", "cpu0",
        "socket_hub0", "remote_lane0", "socket_hub1", "cpu1", "pcie_switch2", "gpu4",
    ]  # fmt: skip
    assert "remote_lane2" in topo.route_nodes(1, 6)
    assert "remote_lane2" in topo.route_nodes(5, 2)
    assert "socket_hub0" not in topo.route_nodes(0, 3)


def test_without_lanes_the_tree_is_unchanged():
    topo = pcie_tree(8, p2p=False)
    assert topo.graph.edges["cpu0", "cpu1"]["kind"] == "socket"
    assert "socket_hub0" not in topo.graph


def test_pcie_bandwidth_overrides_the_generation_rate():
    topo = pcie_tree(8, pcie_bandwidth_Bps="20 GB/s")
    assert topo.graph.edges["gpu0", "pcie_switch0"]["bandwidth_Bps"] == 20e9
