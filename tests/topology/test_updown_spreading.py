"""Up/down routing spreads traffic over equal parallel links (issue 11, section 5): on a fat
tree with several spines, the routes of every cross-leaf GPU pair use each leaf-spine link in
each direction about equally often (including spine counts that do not divide the GPUs).
Counted here from the routes alone."""

from __future__ import annotations

from collections import Counter

import pytest

from atpsim.topology.spec import load_topology


@pytest.mark.parametrize(("nodes", "over"), [(4, 1), (4, 2), (6, 1.5), (8, 4)])
def test_cross_leaf_routes_use_every_spine_evenly(nodes, over):
    topology = load_topology({"builder": "ib-cluster", "nodes": nodes, "gpus_per_node": 4,
                              "leaf_size": 8, "oversubscription": over})  # fmt: skip
    kind = {node: data["kind"] for node, data in topology.graph.nodes(data=True)}
    spines = sorted(n for n in kind if kind[n] == "ib_spine")
    assert len(spines) >= 2
    up, down, crossing = Counter(), Counter(), 0
    for src in range(topology.n_gpus):
        for dst in range(topology.n_gpus):
            path = topology.route_nodes(src, dst) if src != dst else []
            hops = list(zip(path, path[1:], strict=False))
            for a, b in hops:
                if kind[b] == "ib_spine":
                    up[(a, b)] += 1
                elif kind[a] == "ib_spine":
                    down[(a, b)] += 1
            crossing += any(kind[n] == "ib_spine" for n in path)
    assert crossing > 0
    leaves = sorted(n for n in kind if kind[n] == "ib_leaf")
    for leaf in leaves:
        # The spine is picked per destination, so the fairest split is uneven by at most one
        # destination's routes: from this leaf's GPUs (up) or from all the others (down).
        local = len([n for n in topology.graph[leaf] if kind[n] != "ib_spine"])
        ups = [up[(leaf, s)] for s in spines]
        downs = [down[(s, leaf)] for s in spines]
        assert min(ups) > 0 and max(ups) - min(ups) <= local, ups
        assert min(downs) > 0 and max(downs) - min(downs) <= topology.n_gpus - local, downs
