"""Builder shapes checked against oracles that share no code with the builders (issue 11,
section 5): the torus shape for sizes that are not squares, and the fat tree's spine count
when the oversubscription ratio is not a whole number."""

from __future__ import annotations

import pytest

from atpsim.topology.spec import load_topology


def most_square_pair(n: int) -> tuple[int, int]:
    """By brute force: the factor pair d x e = n, d <= e, with the smallest e - d."""
    pairs = [(d, n // d) for d in range(1, n + 1) if n % d == 0 and d <= n // d]
    return min(pairs, key=lambda pair: pair[1] - pair[0])


@pytest.mark.parametrize("n", [2, 3, 6, 7, 8, 12, 18, 20, 32, 45, 50, 97, 120, 128, 210])
def test_a_torus_sized_by_gpu_count_is_the_most_square_shape(n):
    topology = load_topology("torus", n_gpus=n)
    assert topology.n_gpus == n
    assert tuple(topology.meta["dims"]) == most_square_pair(n)


@pytest.mark.parametrize("n", [6, 12, 20])
def test_torus_neighbours_follow_the_shape(n):
    """Every GPU of a d x e torus (both > 2) links to exactly 4 others; with a side of 2 or 1
    the wrap-around folds onto the same neighbour."""
    topology = load_topology("torus", n_gpus=n)
    d, e = most_square_pair(n)
    expected = (min(d - 1, 2) if d > 1 else 0) + (min(e - 1, 2) if e > 1 else 0)
    gpus = [node for node, data in topology.graph.nodes(data=True) if data["kind"] == "gpu"]
    degrees = {len([m for m in topology.graph[g] if m in gpus]) for g in gpus}
    assert degrees == {expected}


@pytest.mark.parametrize("oversubscription", [1, 1.25, 1.5, 2, 2.5, 3, 7.9])
@pytest.mark.parametrize(("nodes", "gpus_per_node", "leaf_size"), [(6, 4, 8), (5, 4, 12)])
def test_fat_tree_uplinks_carry_the_promised_share_and_no_more(
    nodes, gpus_per_node, leaf_size, oversubscription
):
    """Each leaf's uplink capacity must be at least its down-port capacity / ratio (else the
    tree is more oversubscribed than asked) and one spine fewer must fall short (else it
    wastes a spine): n_spines is the least whole number >= down_ports / ratio."""
    topology = load_topology({"builder": "ib-cluster", "nodes": nodes, "gpus_per_node": gpus_per_node,
                              "leaf_size": leaf_size, "oversubscription": oversubscription})  # fmt: skip
    graph = topology.graph
    kind = {node: data["kind"] for node, data in graph.nodes(data=True)}
    spines = [n for n in graph if kind[n] == "ib_spine"]
    leaves = [n for n in graph if kind[n] == "ib_leaf"]
    assert len(leaves) > 1
    widest = max(len([m for m in graph[leaf] if kind[m] != "ib_spine"]) for leaf in leaves)
    for leaf in leaves:
        up = [m for m in graph[leaf] if kind[m] == "ib_spine"]
        assert len(up) == len(spines)
    assert len(spines) * oversubscription >= widest
    assert (len(spines) - 1) * oversubscription < widest


def _quantity_params():
    from atpsim.topology.registry import builder_info, builder_names

    return [
        (name, param.name, param.kind)
        for name in builder_names()
        for param in builder_info(name).params
        if param.kind in ("time", "bandwidth")
    ]


@pytest.mark.parametrize(("builder", "param", "kind"), _quantity_params())
def test_every_builder_refuses_a_negative_latency_or_bandwidth(builder, param, kind):
    """A negative latency (or a bandwidth <= 0) given to any builder, through the Python API
    or a spec string, is a TopologyError naming the parameter."""
    from atpsim.errors import TopologyError
    from atpsim.topology.sizing import build_from_builder

    bad = -1e-6 if kind == "time" else -25e9
    with pytest.raises(TopologyError) as info:
        build_from_builder(builder, {param: bad})
    assert param in info.value.format()
