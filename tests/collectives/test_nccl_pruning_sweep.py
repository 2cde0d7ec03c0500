"""The pruned tuner (atpsim.engine.nccl._fastest) picks what simulating every (algorithm,
protocol) candidate whole picks, on 1 KiB .. 1 GiB and on one- and multi-node machines, with
every candidate on the compiled kernel so that the horizon stops the ones that surely lose.

A candidate simulated after the fastest found so far runs under the horizon ``best - fixed``
with ``fixed`` ITS OWN fixed latency (its time is ``fixed + simulated``). Subtracting the
best candidate's fixed latency instead stops a candidate that would have won: on
``ib-cluster:8x8`` at 16 MiB the ring with LL (fixed latency 112 us) beats the ring with LL128
simulated before it (fixed 283 us), but under the horizon ``best - 283 us`` its simulation
stopped as if it lost, and that mutation (issue 25's mutation 3) picked LL128."""

from __future__ import annotations

import pytest

from atpsim.engine.nccl import run_nccl
from atpsim.engine.solvers import event_loop
from atpsim.topology.spec import clear_cache, load_topology

MACHINES = [
    "dgx-a100",
    "dgx-h100",
    "ib-cluster:2x8,nics_per_node=4",
    "ib-cluster:4x8",
    "ib-cluster:8x8",
]
#: 1 KiB, 4 KiB, ..., 1 GiB.
SIZES = [2**e for e in range(10, 31, 2)]


@pytest.mark.parametrize("spec", MACHINES)
def test_the_pruned_choice_is_the_plain_choice_at_every_size(spec, monkeypatch):
    """Per size: the same algorithm, protocol and channels, and the same time to the bit.
    The plain call runs on its own copy of the topology (no answer shared by the memo)."""
    monkeypatch.setattr(event_loop, "KERNEL_MIN_FLOWS", 0)
    plain_topology = load_topology(spec)
    clear_cache()
    topology = load_topology(spec)
    groups = [list(range(topology.n_gpus))]
    for nbytes in SIZES:
        plain = run_nccl(plain_topology, "all_reduce", "auto", groups, nbytes, prune=False)
        pruned = run_nccl(topology, "all_reduce", "auto", groups, nbytes)
        assert (pruned.algorithm, pruned.protocol, pruned.channels) == (
            plain.algorithm,
            plain.protocol,
            plain.channels,
        ), nbytes
        assert pruned.time_s == plain.time_s, nbytes


def test_ib_cluster_8x8_at_16_mib_runs_the_ring_with_ll(monkeypatch):
    """The case the mutation got wrong, stated outright (NCCL's choice by this model, the plain
    path's)."""
    monkeypatch.setattr(event_loop, "KERNEL_MIN_FLOWS", 0)
    topology = load_topology("ib-cluster:8x8")
    call = run_nccl(topology, "all_reduce", "auto", [list(range(64))], 2**24)
    assert (call.algorithm, call.protocol) == ("ring", "LL")
