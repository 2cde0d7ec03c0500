"""Pair routes: on a torus under dimension-order routing every pair is routed at once
(:func:`atpsim.engine.routes.torus_routes`); the links must be the router's, in its order."""

import numpy as np
import pytest

import atpsim.engine.routes as routes
from atpsim.api import load_topology
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
