"""nvswitch and nvlink_network_switch builders and up/down routing on a star."""

import time

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.builders.switch import nvlink_network_switch, nvswitch


@pytest.mark.parametrize("generation, gbps", [("a100", 300e9), ("h100", 450e9)])
def test_nvswitch_structure(generation, gbps):
    topo = nvswitch(8, generation=generation)
    assert topo.n_gpus == 8
    kinds = [d["kind"] for _, d in topo.graph.nodes(data=True)]
    assert kinds.count("nvswitch") == 1
    assert topo.graph.degree("nvswitch0") == 8
    assert set(topo.links.bandwidth_Bps) == {gbps}
    assert set(topo.links.kind) == {"nvlink"}


def test_switch_route_is_two_hops_through_the_switch():
    topo = nvswitch(8)
    assert topo.route_nodes(2, 5) == ["gpu2", "nvswitch0", "gpu5"]
    route = topo.route(2, 5)
    assert topo.path_latency_s(route) == pytest.approx(0.6e-6)
    assert topo.bottleneck_Bps(route) == 300e9


def test_nvlink_network_switch_structure():
    topo = nvlink_network_switch(64)
    assert topo.n_gpus == 64
    assert topo.graph.degree("nvl_switch0") == 64
    assert topo.graph.nodes["nvl_switch0"]["kind"] == "nvl_switch"
    assert set(topo.links.kind) == {"nvlink_network"}


def test_4096_ring_routes_are_fast():
    topo = nvlink_network_switch(4096)
    start = time.perf_counter()
    for i in range(4096):
        assert len(topo.route(i, (i + 1) % 4096)) == 2
    assert time.perf_counter() - start < 2.0


def test_bad_parameters():
    with pytest.raises(TopologyError, match="generation"):
        nvswitch(8, generation="v100")
    with pytest.raises(TopologyError, match="gpus"):
        nvlink_network_switch(0)
    with pytest.raises(TopologyError, match="gpu_bandwidth_Bps"):
        nvlink_network_switch(8, gpu_bandwidth_Bps="-3 GB/s")
