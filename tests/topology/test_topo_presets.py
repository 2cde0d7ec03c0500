"""Every preset builds with the structure the paper describes and names its hardware."""

import pytest

from atpsim.compute.hardware import profile_names
from atpsim.topology.presets import preset_info, preset_names
from atpsim.topology.spec import load_topology


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_builds_with_hardware_and_sources(name):
    topo = load_topology(name)
    assert topo.meta["hardware"] in profile_names()
    assert topo.meta["preset"] == name
    assert preset_info(name)["source"]


def test_paper_presets_sizes():
    sizes = {n: load_topology(n).n_gpus for n in ["ic1", "ic2", "ic3", "ic4", "ic5", "ic6"]}
    assert sizes == {"ic1": 8, "ic2": 8, "ic3": 8, "ic4": 16, "ic5": 256, "ic6": 16}


def test_ic1_route_crosses_both_sockets_and_host_memory():
    path = load_topology("ic1").route_nodes(0, 7)
    assert {"cpu0", "cpu1", "host_mem0"} <= set(path)


def test_ic2_four_nvlink_pairs():
    topo = load_topology("ic2")
    kinds = [d["kind"] for _, _, d in topo.graph.edges(data=True)]
    assert kinds.count("nvlink") == 4


def test_ic4_resizes_by_nodes():
    topo = load_topology({"preset": "ic4", "gpus": 8})
    assert topo.n_gpus == 8 and topo.meta["nodes"] == 2
    assert load_topology("ic4", n_gpus=32).meta["nodes"] == 8


def test_ic6_default_is_figure_7b():
    topo = load_topology("ic6")
    assert topo.meta["dims"] == (4, 4)
    assert set(topo.links.bandwidth_Bps) == {25e9}
