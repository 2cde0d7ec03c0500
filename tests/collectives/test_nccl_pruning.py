"""``auto`` simulates only the candidates that can win (atpsim.engine.nccl._fastest), and stops
those that surely end after the fastest found: the same call as simulating every (algorithm,
protocol) whole and keeping the first fastest, on machines where the ring, the tree, NVLS or a
protocol wins, and never more simulations than that."""

import pytest

import atpsim.engine.nccl as nccl
from atpsim.collectives.nccl import NcclPlanner, auto_algorithms
from atpsim.engine.nccl import run_nccl
from atpsim.engine.solvers import event_loop
from atpsim.topology.spec import clear_cache, load_topology

CASES = [
    ("dgx-a100", "all_reduce", None, 2**16),
    ("dgx-a100", "all_reduce", None, 2**30),
    ("dgx-h100", "all_reduce", None, 2**28),
    ("dgx-h100", "all_gather", None, 2**24),
    ("ib-cluster:2x8,nics_per_node=4", "all_reduce", None, 2**20),
    ("ib-cluster:2x8,nics_per_node=4", "all_reduce", None, 2**27),
    ("ib-cluster:4x8", "all_reduce", [list(range(0, 32, 8)), list(range(1, 32, 8))], 2**26),
    ("ib-cluster:4x8", "reduce_scatter", None, 2**25),
    ("ic4", "all_reduce", None, 2**24),
    ("ic1", "all_reduce", [[0, 1, 2, 3], [4, 5, 6, 7]], 2**22),
]


@pytest.mark.parametrize("spec, op, groups, nbytes", CASES)
def test_pruned_auto_is_the_plain_auto(spec, op, groups, nbytes, monkeypatch):
    topology = load_topology(spec)
    groups = groups or [list(range(topology.n_gpus))]
    plain = run_nccl(topology, op, "auto", groups, nbytes, prune=False)
    simulated = []
    real = nccl._nccl_call

    def counted(*args, **kwargs):
        simulated.append((args[1].algorithm, args[1].protocol))
        return real(*args, **kwargs)

    monkeypatch.setattr(nccl, "_nccl_call", counted)
    pruned = run_nccl(topology, op, "auto", groups, nbytes)
    assert (pruned.algorithm, pruned.protocol, pruned.channels) == (
        plain.algorithm, plain.protocol, plain.channels)
    assert pruned.time_s == plain.time_s
    assert pruned.group_time_s == plain.group_time_s
    assert 1 <= len(simulated) <= 3 * len(auto_algorithms(topology, op, groups))


def test_a_large_buffer_skips_the_slow_protocols(monkeypatch):
    """1 GiB on 2 nodes: LL and LL128 move the bytes at a fraction of the link rate, so their
    bound lies above the Simple protocol's simulated time and they are never simulated."""
    topology = load_topology("ib-cluster:2x8,nics_per_node=4")
    simulated = []
    real = nccl._nccl_call

    def counted(*args, **kwargs):
        simulated.append((args[1].algorithm, args[1].protocol))
        return real(*args, **kwargs)

    monkeypatch.setattr(nccl, "_nccl_call", counted)
    run_nccl(topology, "all_reduce", "auto", [list(range(16))], 2**30)
    assert {protocol for _, protocol in simulated} == {"Simple"}


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple", "none"])
def test_the_bound_is_below_the_simulated_time(protocol):
    topology = load_topology("ib-cluster:2x8,nics_per_node=4")
    groups = [list(range(16))]
    for algorithm in ("ring", "tree", "ring-rank-order"):
        call = run_nccl(topology, "all_reduce", algorithm, groups, 2**26, protocol=protocol)
        planner = NcclPlanner(topology, "all_reduce", groups)
        (candidate,) = planner.candidates(algorithm, protocol)
        bound = planner.lower_bound_s(candidate, 2**26)
        assert 0 < bound <= call.time_s, (algorithm, protocol)


@pytest.mark.parametrize("spec, groups, nbytes", [
    ("ib-cluster:8x8", None, 2**22),
    ("ib-cluster:6x8", [list(range(0, 48, 2)), list(range(1, 48, 2))], 2**24),
    ("ib-cluster:4x8", None, 2**26),
])
def test_candidates_stopped_at_the_horizon_leave_the_plain_choice(spec, groups, nbytes,
                                                                   monkeypatch):
    """Every run on the compiled kernel, so that a candidate simulated after a faster one
    stops once it surely ends later (atpsim.engine.solvers.event_loop.horizon): the call is
    the one simulating every candidate whole gives, and some candidate did stop. The plain
    call runs on its own copy of the topology (no answer shared through the engine's memo).
    The link bound is off here (it skips some of these candidates before they start), so the
    horizon itself is what is tested."""
    monkeypatch.setattr(event_loop, "KERNEL_MIN_FLOWS", 0)
    monkeypatch.setattr(nccl, "link_bound_s", lambda *args: 0.0)
    plain_topology = load_topology(spec)
    clear_cache()
    topology = load_topology(spec)
    groups = groups or [list(range(topology.n_gpus))]
    plain = run_nccl(plain_topology, "all_reduce", "auto", groups, nbytes, prune=False)
    stopped = []
    real = nccl._nccl_call

    def counted(*args, **kwargs):
        try:
            return real(*args, **kwargs)
        except event_loop.PastHorizon:
            stopped.append((args[1].algorithm, args[1].protocol))
            raise

    monkeypatch.setattr(nccl, "_nccl_call", counted)
    pruned = run_nccl(topology, "all_reduce", "auto", groups, nbytes)
    assert (pruned.algorithm, pruned.protocol) == (plain.algorithm, plain.protocol)
    assert pruned.time_s == plain.time_s
    assert pruned.group_time_s == plain.group_time_s
    assert stopped
