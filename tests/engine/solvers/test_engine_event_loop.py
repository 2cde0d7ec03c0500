"""The event loop against a small, slow, obviously-correct reference (hypothesis).

The reference below is plain Python: a heap of arrivals, a dict of active flows, and
progressive filling over every active flow at every event (no lazy components, no batching
beyond equal times). Random small collectives on contended topologies, with every flow's
bytes scaled by its own random factor (so flows drift apart and share links unevenly), must
give every flow the same start and finish times to 1e-9 relative.
"""

import heapq

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.collectives.registry import algorithm_names, build_schedule
from atpsim.collectives.schedule import rendezvous_dependencies
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers import event_loop, flow_kernel
from atpsim.engine.solvers.event import flatten
from atpsim.engine.solvers.flow_kernel import compiled_kernel
from tests.engine.conftest import star, tree, two_switches

TOPOLOGIES = {
    "tree": tree(3, 3, [100e9, 40e9, 25e9, 70e9]),
    "star": star(9, latency_s=5e-7, slow=(4, 20e9)),
    "two": two_switches(5, uplink_Bps=30e9),
}
OPS = [(op, alg) for op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")
       for alg in algorithm_names(op)]


def progressive_filling(active, links_of, capacity):
    """Max-min rates of the *active* flows: raise every unfrozen flow alike until a link is
    full, freeze the flows crossing it, repeat (Bertsekas and Gallager, Sec. 6.5.2)."""
    left = {}
    for f in active:
        for link in links_of[f]:
            left[link] = float(capacity[link])
    rate, unfrozen = {}, set(active)
    while unfrozen:
        count = {}
        for f in unfrozen:
            for link in links_of[f]:
                count[link] = count.get(link, 0) + 1
        level = min(max(left[link], 0.0) / c for link, c in count.items())
        full = {link for link, c in count.items() if max(left[link], 0.0) / c <= level * (1 + 1e-12)}
        frozen = [f for f in unfrozen if full.intersection(links_of[f])]
        for f in frozen:
            rate[f] = level
            unfrozen.discard(f)
            for link in links_of[f]:
                left[link] -= level
    return rate


def reference_run(routes, capacity, pairs, nbytes, deps):
    """Start and finish of every flow: ready when its dependencies finished, moving after
    its path latency, at max-min rates recomputed at every arrival and completion."""
    n = len(pairs)
    links_of = [routes.links[routes.ptr[p]:routes.ptr[p + 1]].tolist() for p in pairs]
    waiting = np.diff(deps[0]).tolist()
    children = [[] for _ in range(n)]
    for i in range(n):
        for j in deps[1][deps[0][i]:deps[0][i + 1]]:
            children[int(j)].append(i)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    arrivals, active, now = [], {}, 0.0

    def ready(i):
        start[i] = now
        heapq.heappush(arrivals, (now + float(routes.latency_s[pairs[i]]), i))

    for i in range(n):
        if waiting[i] == 0:
            ready(i)
    while len(active) or arrivals:
        while arrivals and arrivals[0][0] <= now:
            i = heapq.heappop(arrivals)[1]
            active[i] = float(nbytes[i])
        rate = progressive_filling(active, links_of, capacity)
        ends = [now + left / rate[f] for f, left in active.items()]
        t = min(ends + ([arrivals[0][0]] if arrivals else []))
        for f in active:
            active[f] -= rate[f] * (t - now)
        now = t
        for f in [f for f in active if active[f] <= rate[f] * 1e-10 * max(now, 1e-12)]:
            del active[f]
            finish[f] = now
            for c in children[f]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    ready(c)
    return start, finish


@st.composite
def cases(draw):
    topo = TOPOLOGIES[draw(st.sampled_from(sorted(TOPOLOGIES)))]
    ranks = draw(st.permutations(range(topo.n_gpus)))
    sizes = draw(st.lists(st.integers(2, 5), min_size=1, max_size=3)
                 .filter(lambda s: sum(s) <= topo.n_gpus))
    groups, at = [], 0
    for size in sizes:
        groups.append(list(ranks[at:at + size]))
        at += size
    op, alg = draw(st.sampled_from(OPS))
    schedule = build_schedule(op, alg, groups, draw(st.sampled_from([1e3, 1e6, 3e7])))
    routes = pair_routes(topo, schedule.steps)
    flows = flatten(schedule.steps)
    seed = draw(st.integers(0, 2**32 - 1))
    scale = np.random.default_rng(seed).uniform(0.5, 2.0, len(flows.src))
    deps = rendezvous_dependencies(flows.src, flows.dst, flows.step, flows.lane)
    return topo, routes, routes.index(flows.src, flows.dst), flows.nbytes * scale, deps


def run_by(loop, routes, capacity, pairs, nbytes, deps):
    """run_flows by the compiled kernel (at every size) or by the reference loop (flow_loop.Loop)."""
    saved = event_loop.KERNEL_MIN_FLOWS, event_loop.use_kernel
    try:
        event_loop.KERNEL_MIN_FLOWS = 0
        event_loop.use_kernel = loop == "kernel"
        return event_loop.run_flows(routes, capacity, pairs, nbytes, deps)
    finally:
        event_loop.KERNEL_MIN_FLOWS, event_loop.use_kernel = saved


@pytest.mark.parametrize("loop", ["kernel", "reference"])
@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=cases())
def test_event_loop_equals_the_reference(loop, case):
    if loop == "kernel" and compiled_kernel() is None:
        pytest.skip("numba is not installed")
    topo, routes, pairs, nbytes, deps = case
    run = run_by(loop, routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    start, finish = reference_run(routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    assert run.start_s == pytest.approx(start, rel=1e-9, abs=1e-18)
    assert run.finish_s == pytest.approx(finish, rel=1e-9, abs=1e-18)
    assert run.delivered == pytest.approx(nbytes, rel=1e-9)


def assert_same_run(fast, plain):
    """Every flow's start and finish, bytes delivered and bytes per link, to 1e-9 relative."""
    for name in ("start_s", "finish_s", "delivered", "link_bytes"):
        assert getattr(fast, name) == pytest.approx(getattr(plain, name), rel=1e-9, abs=1e-18), name


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=cases())
def test_kernel_and_reference_loop_agree(case):
    """The compiled kernel (lazy: bytes settled when a rate changes, components walked over
    per-link flow lists) gives the reference loop's run to float rounding (measured: 2e-13)."""
    if compiled_kernel() is None:
        pytest.skip("numba is not installed")
    topo, routes, pairs, nbytes, deps = case
    fast = run_by("kernel", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    plain = run_by("reference", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    assert_same_run(fast, plain)


@pytest.mark.parametrize("first_slots", [1 << 20, 4])
@pytest.mark.parametrize("op, alg", [("all_to_all", "pairwise"), ("all_reduce", "ring"),
                                     ("all_reduce", "rabenseifner")])
def test_kernel_and_reference_loop_agree_on_a_larger_contended_run(op, alg, first_slots, monkeypatch):
    """Hundreds of flows in flight over a shared uplink, bytes scaled at random (every flow
    finishes at its own time): slots are freed and reused (and, with a soft limit of 4,
    compacted at almost every join), the heaps grow, components span many flows."""
    if compiled_kernel() is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(flow_kernel, "FIRST_SLOTS", first_slots)
    topo = tree(4, 6, [100e9, 40e9, 25e9, 70e9])
    ranks = np.random.default_rng(7).permutation(topo.n_gpus)
    groups = [ranks[:12].tolist(), ranks[12:].tolist()]
    schedule = build_schedule(op, alg, groups, 1e6)
    routes = pair_routes(topo, schedule.steps)
    flows = flatten(schedule.steps)
    nbytes = flows.nbytes * np.random.default_rng(11).uniform(0.5, 2.0, len(flows.src))
    deps = rendezvous_dependencies(flows.src, flows.dst, flows.step, flows.lane)
    pairs = routes.index(flows.src, flows.dst)
    fast = run_by("kernel", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    plain = run_by("reference", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    assert_same_run(fast, plain)
    assert fast.delivered == pytest.approx(nbytes, rel=1e-9)
