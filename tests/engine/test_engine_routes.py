"""Pair routes: on a torus under dimension-order routing and under up*/down* routing (fat
trees of every builder option, switches) every pair is routed at once
(:func:`atpsim.engine.routes.torus_routes`, :func:`atpsim.engine.updown_routes.updown_routes`);
the links must be the router's, in its order."""

import weakref

import networkx as nx
import numpy as np
import pytest

import atpsim.engine.routes as routes
from atpsim.api import load_topology
from atpsim.topology.graph import Topology
from atpsim.topology.routing import UpDownRouter
from tests.engine.conftest import star


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:5x3", "torus:2x6", "torus:7",
                                  "torus:2x2x3", "torus:1x4", "torus:4x1x3", "torus:6x6"])
@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_torus_routes_are_the_routers(spec, chunk, monkeypatch):
    monkeypatch.setattr(routes, "TORUS_CHUNK_PAIRS", chunk)
    topo = load_topology(spec)
    n = topo.n_gpus
    keys = np.array([a * n + b for a in range(n) for b in range(n) if a != b], dtype=np.int64)
    table = routes.route_pairs(topo, keys)
    for i, key in enumerate(keys.tolist()):
        assert tuple(table.links[table.ptr[i]:table.ptr[i + 1]].tolist()) == topo.route(key // n, key % n)
    hop_latency = [topo.path_latency_s(topo.route(k // n, k % n)) for k in keys.tolist()]
    assert table.latency_s == pytest.approx(hop_latency, rel=1e-15)


def test_other_routers_route_pair_by_pair():
    assert routes._torus_hops(star(4)) is None


def _assert_routes_are_the_routers(topo, keys):
    """The links of every pair (in order) and its latency, pair by pair against the router."""
    n = topo.n_gpus
    table = routes.route_pairs(topo, keys)
    for i, key in enumerate(keys.tolist()):
        assert tuple(table.links[table.ptr[i]:table.ptr[i + 1]].tolist()) == topo.route(key // n, key % n)
    hop_latency = [topo.path_latency_s(topo.route(k // n, k % n)) for k in keys.tolist()]
    assert table.latency_s == pytest.approx(hop_latency, rel=1e-15)


FAT_TREES = [
    "ib-cluster:4x8", "ib-cluster:8x8", "ib-cluster:5x3", "ib-cluster:12x2",
    "ib-cluster:6x8,nics_per_node=4", "ib-cluster:7x4,nics_per_node=3",
    "ib-cluster:9x2,nics_per_node=1,leaf_size=4",
    "ib-cluster:8x4,leaf_size=6,oversubscription=2", "ib-cluster:8x4,leaf_size=8,oversubscription=1.5",
    "ib-cluster:10x2,leaf_size=7,oversubscription=2.5", "ib-cluster:6x8,oversubscription=3",
    "ib-cluster:6x8,wiring=rail", "ib-cluster:5x4,nics_per_node=2,wiring=rail,oversubscription=1.5",
    "ib-cluster:6x4,intra=nvlink-mesh", "ib-cluster:6x4,intra=nvlink-mesh,nics_per_node=2,leaf_size=3",
    "ib-cluster:3x8,generation=h100", "ib-cluster:1x8",
    "nvswitch:8", "nvlink-pairs:8", "pcie-tree:8", "nvlink-network-switch:16",
]


@pytest.mark.parametrize("spec", FAT_TREES)
def test_updown_routes_are_the_routers(spec):
    topo = load_topology(spec)
    n = topo.n_gpus
    assert routes.updown_routes(topo, np.array([0]), np.array([n - 1])) is not None
    keys = np.array([a * n + b for a in range(n) for b in range(n) if a != b], dtype=np.int64)
    _assert_routes_are_the_routers(topo, keys)


def _dual_homed():
    """GPUs 0-3 each on switches A and B, GPUs 4-7 on C, a root over A, B, C (C's root link
    faster, g6-g7 also joined directly): routes down from the root choose between A and B by
    the source rank."""
    g = nx.Graph()
    for name, level in [("A", 1), ("B", 1), ("C", 1), ("root", 2)]:
        g.add_node(name, kind="switch", level=level)
    for r in range(8):
        g.add_node(f"g{r}", kind="gpu", rank=r, level=0)
        for sw in ("A", "B") if r < 4 else ("C",):
            g.add_edge(f"g{r}", sw, kind="custom", bandwidth_Bps=100e9, latency_s=1e-6)
    for sw, bandwidth_Bps in [("A", 50e9), ("B", 50e9), ("C", 80e9)]:
        g.add_edge(sw, "root", kind="custom", bandwidth_Bps=bandwidth_Bps, latency_s=2e-6)
    g.add_edge("g6", "g7", kind="custom", bandwidth_Bps=10e9, latency_s=1e-7)
    return Topology("dual-homed", g, UpDownRouter())


def test_updown_routes_choose_down_by_source_rank():
    topo = _dual_homed()
    assert {topo.route_nodes(r, 0)[3] for r in range(4, 8)} == {"A", "B"}
    keys = np.array([a * 8 + b for a in range(8) for b in range(8) if a != b], dtype=np.int64)
    _assert_routes_are_the_routers(topo, keys)


def test_updown_routes_of_a_few_pairs_and_of_a_pair_to_itself():
    topo = load_topology("ib-cluster:6x8,oversubscription=1.5")
    n = topo.n_gpus
    keys = np.unique(np.random.default_rng(16).integers(0, n * n, 200))
    keys = keys[keys // n != keys % n]
    _assert_routes_are_the_routers(topo, keys)
    ptr, links = routes.updown_routes(topo, np.array([3, 5]), np.array([3, 40]))
    assert ptr[1] == 0 and tuple(links.tolist()) == topo.route(5, 40)


def test_other_routers_are_not_routed_up_down():
    assert routes.updown_routes(star(4), np.array([0]), np.array([1])) is None
    assert routes.updown_routes(load_topology("torus:4x4"), np.array([0]), np.array([1])) is None
    staged = load_topology("pcie-tree:8,p2p=false")
    assert routes.updown_routes(staged, np.array([0]), np.array([1])) is None


def test_path_sets_are_kept_up_to_a_budget_of_links(monkeypatch):
    """A pair set routed again is taken from those kept (the same arrays, the router not
    called), and the least recent sets are dropped once those kept of the routing base hold
    more than PATH_SET_MAX_LINKS links in all."""
    monkeypatch.setattr(routes, "_PATHS", weakref.WeakKeyDictionary())  # none kept from other tests
    topo = load_topology("torus:4x4")
    n = topo.n_gpus
    sets = [np.array([a * n + b for b in range(n) if b != a], dtype=np.int64) for a in range(4)]
    first = routes.route_pairs(topo, sets[0])
    size = len(first.links)
    monkeypatch.setattr(routes, "PATH_SET_MAX_LINKS", 3 * size)  # three of these sets
    calls = []
    at_once = routes._routes_at_once
    monkeypatch.setattr(routes, "_routes_at_once", lambda *a: calls.append(1) or at_once(*a))
    for keys in sets[1:]:  # each routed once: the fourth drops the first, least recent
        routes.route_pairs(topo, keys)
    assert len(calls) == 3
    again = routes.route_pairs(topo, sets[3])
    assert len(calls) == 3 and np.array_equal(again.links, routes.route_pairs(topo, sets[3]).links)
    routes.route_pairs(topo, sets[0])
    assert len(calls) == 4  # dropped, routed again
    kept = routes._PATHS[routes.routing_base(topo)]
    assert kept.links == sum(len(links) for _, links in kept.sets.values()) <= 3 * size
