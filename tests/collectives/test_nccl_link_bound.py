"""The link bound of NCCL's tuner (atpsim.engine.nccl.link_bound_s): a candidate's fixed
latency plus the longest any link needs for the bytes routed over it. It must stay below the
simulated time of every candidate (so skipping by it is exact), be at least the planner's
per-GPU bound, count each link's bytes as the engine moves them, and skip the protocols that
cannot win an all-to-all across a fat tree, with the answer of simulating every candidate."""

import numpy as np
import pytest

import atpsim.engine.nccl as nccl
from atpsim.collectives.nccl import NcclPlanner
from atpsim.engine.nccl import link_bound_s, run_nccl
from atpsim.topology.spec import load_topology

CASES = [
    ("ib-cluster:8x8", "all_to_all", None),
    ("ib-cluster:4x8", "all_reduce", None),
    ("ib-cluster:4x8", "all_reduce", [list(range(0, 32, 8)), list(range(1, 32, 8))]),
    ("ib-cluster:2x8,nics_per_node=4", "reduce_scatter", None),
    ("ic1", "all_reduce", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("ic4", "all_gather", None),
    ("dgx-h100", "all_reduce", None),
]


@pytest.mark.parametrize("spec, op, groups", CASES)
@pytest.mark.parametrize("nbytes", [2**16, 2**26])
def test_the_link_bound_lies_between_the_gpu_bound_and_the_simulated_time(spec, op, groups,
                                                                           nbytes):
    topology = load_topology(spec)
    groups = groups or [list(range(topology.n_gpus))]
    planner = NcclPlanner(topology, op, groups)
    for candidate in planner.candidates("auto"):
        simulated = run_nccl(topology, op, candidate.algorithm, groups, nbytes,
                             protocol=candidate.protocol).time_s
        bound = link_bound_s(planner, candidate, nbytes)
        assert planner.lower_bound_s(candidate, nbytes) * (1 - 1e-9) <= bound <= simulated, \
            (candidate.algorithm, candidate.protocol)


@pytest.mark.parametrize("spec, op, groups", CASES[:4])
def test_the_loads_are_the_bytes_the_engine_moves_on_each_link(spec, op, groups):
    topology = load_topology(spec)
    groups = groups or [list(range(topology.n_gpus))]
    planner = NcclPlanner(topology, op, groups)
    candidate = planner.candidates("auto", "none")[0]
    call = run_nccl(topology, op, candidate.algorithm, groups, 2**24, protocol="none")
    loads = nccl._link_loads(planner, candidate.plan, 2**24)
    assert np.allclose(loads, call.link_bytes, rtol=1e-12, atol=0)


def test_a_single_link_bound_by_hand():
    """All-to-all of 2 nodes x 8 GPUs, one HDR NIC per GPU (24 GB/s: 200 Gb/s x 24/25),
    bare links: each GPU sends 8 of its 16 shards of n/16 to the other node through its own
    NIC, n/2 bytes over a 24 GB/s link."""
    topology = load_topology("ib-cluster:2x8")
    planner = NcclPlanner(topology, "all_to_all", [list(range(16))])
    (candidate,) = planner.candidates("pairwise", "none")
    nic_Bps = min(b for b, k in zip(topology.links.bandwidth_Bps, topology.links.kind,
                                    strict=True) if k == "ib")
    assert link_bound_s(planner, candidate, 2**30) == pytest.approx(2**30 / 2 / nic_Bps,
                                                                    rel=1e-8)


def test_all_to_all_across_a_fat_tree_skips_the_protocol_that_cannot_win(monkeypatch):
    """1 GiB on ib-cluster:8x8: Simple takes 45.2 ms. The GPUs' own links bound LL at 12.8 ms,
    so it used to be simulated too; its NICs bound it at 78 ms, so it is not. LL128 (bound 42.0
    ms) still is. The call is the one simulating every candidate gives."""
    topology = load_topology("ib-cluster:8x8")
    groups = [list(range(64))]
    plain = run_nccl(topology, "all_to_all", "auto", groups, 2**30, prune=False)
    simulated = []
    real = nccl._nccl_call

    def counted(*args, **kwargs):
        simulated.append(args[1].protocol)
        return real(*args, **kwargs)

    monkeypatch.setattr(nccl, "_nccl_call", counted)
    pruned = run_nccl(topology, "all_to_all", "auto", groups, 2**30)
    assert (pruned.protocol, pruned.time_s, pruned.group_time_s) == (
        plain.protocol, plain.time_s, plain.group_time_s)
    assert plain.protocol == "Simple"
    assert simulated == ["Simple", "LL128"]


def test_the_plain_run_simulates_every_candidate(monkeypatch):
    """engine reference is the plain run: no candidate skipped by a bound or stopped at the
    horizon, so --engine reference checks the tuner's pruning as well as the reductions."""
    topology = load_topology("ib-cluster:8x8")
    simulated = []
    real = nccl._nccl_call

    def counted(*args, **kwargs):
        simulated.append(args[1].protocol)
        return real(*args, **kwargs)

    monkeypatch.setattr(nccl, "_nccl_call", counted)
    groups = [list(range(64))]
    plain = run_nccl(topology, "all_to_all", "auto", groups, 2**24, engine="reference")
    assert sorted(simulated) == ["LL", "LL128", "Simple"]
    assert plain.path == "reference"
