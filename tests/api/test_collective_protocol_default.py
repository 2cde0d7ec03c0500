"""`atpsim collective`'s default protocol: NCCL's tuner (``auto``) on the machines NCCL runs
on; bare links (``none``) on the paper's theory fabrics and custom graphs, which run no NCCL,
so that each row is the time the step simulator charges there (the ``nccl`` backend runs the
bare-link ``event`` engine on them). A protocol asked for by name runs as asked."""

import pytest
from click.testing import CliRunner

from atpsim.api import collective
from atpsim.cli import main
from atpsim.compute.hardware import load_profile, topology_hardware
from atpsim.engine.backends import get_backend
from atpsim.topology.spec import load_topology

THEORY = ["torus:4x4", "ic6", "nvlink-network-switch:16", "ic5"]


@pytest.mark.parametrize("spec", THEORY)
def test_a_theory_fabric_runs_bare_links_by_default(spec):
    default = collective(spec, "all_reduce", "1M:4M", algorithm="ring")
    bare = collective(spec, "all_reduce", "1M:4M", algorithm="ring", protocol="none")
    assert default.protocol == "none"
    assert [r.protocol for r in default.rows] == ["none"] * 3
    assert [r.time_s for r in default.rows] == [r.time_s for r in bare.rows]


@pytest.mark.parametrize("spec", THEORY)
def test_each_row_is_what_the_step_simulator_charges(spec):
    """The step simulator's default backend on a theory fabric: the engine on bare links plus
    the hardware profile's per-call cost."""
    topology = load_topology(spec)
    group = [list(range(topology.n_gpus))]
    overhead_s = load_profile(topology_hardware(topology)).collective_overhead_s
    for row in collective(spec, "all_reduce", "1M:4M", algorithm="ring").rows:
        charged = max(get_backend("nccl")(topology, "all_reduce", "ring", group, row.size_bytes))
        assert row.time_s == pytest.approx(charged + overhead_s, rel=1e-12)


def test_a_protocol_asked_for_runs_on_a_theory_fabric():
    """Simple on torus:4x4 adds its fixed latency: base 8.4 us + 30 NVLink-class steps of
    3.4 us = 110.4 us over the bare links (the spec profile: Simple's line efficiency is 1,
    so the links are the same)."""
    bare = collective("torus:4x4", "all_reduce", "1M", algorithm="ring", protocol="none").rows[0]
    simple = collective("torus:4x4", "all_reduce", "1M", algorithm="ring", protocol="Simple").rows[0]
    assert simple.protocol == "Simple"
    assert simple.time_s - bare.time_s == pytest.approx(8.4e-6 + 30 * 3.4e-6, rel=1e-9)


def test_a_custom_graph_runs_bare_links_by_default():
    graph = {"builder": "custom", "nodes": [{"name": f"g{i}", "kind": "gpu"} for i in range(4)],
             "links": [{"a": f"g{i}", "b": f"g{(i + 1) % 4}", "bandwidth": "100 GB/s"}
                       for i in range(4)]}
    assert collective(graph, "all_reduce", "1M").rows[0].protocol == "none"


@pytest.mark.parametrize("spec", ["dgx-a100", "ib-cluster:2x8"])
def test_machines_that_run_nccl_keep_the_tuner(spec):
    rows = collective(spec, "all_reduce", ["64K", "1G"]).rows
    assert [r.protocol for r in rows] == ["LL", "Simple"]


def test_the_command_says_which_protocol_ran():
    result = CliRunner().invoke(main, ["collective", "-t", "torus:4x4", "--bytes", "1M"])
    assert result.exit_code == 0, result.output
    assert "protocol: none" in result.output
    assert result.output.strip().splitlines()[-1].split()[7] == "none"
