"""Link-disjoint components (atpsim.engine.reductions.components), the split both levels take:
hand-built incidences whose components, link numbering and twins are read off directly, and
the two levels' reductions held bit for bit to their plain runs."""

import numpy as np
import pytest

from atpsim.engine.collective import run_collective
from atpsim.engine.reductions.components import split
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.torus import torus


def incidence(walks):
    """(hop_item, hop_link) of *walks* (item i crosses walks[i], in order)."""
    items = np.repeat(np.arange(len(walks)), [len(w) for w in walks])
    links = np.array([link for w in walks for link in w], dtype=np.int64)
    return items, links


def test_items_sharing_a_link_join_and_components_follow_their_smallest_item():
    """Items 0 and 2 share link 5, item 1 is alone: components {0, 2} and {1}, in that order;
    the links of {0, 2} numbered by first use along item 0's walk then item 2's."""
    items, links = incidence([[7, 5], [3, 4], [5, 6]])
    parts = split(3, items, links, 8)
    assert parts.n == 2 and parts.label.tolist() == [0, 1, 0]
    assert parts.members(0).tolist() == [0, 2] and parts.members(1).tolist() == [1]
    assert parts.links(0).tolist() == [7, 5, 6] and parts.numbers(0).tolist() == [0, 1, 1, 2]
    assert parts.links(1).tolist() == [3, 4] and parts.numbers(1).tolist() == [0, 1]


def test_an_edge_joins_items_that_share_no_link():
    """Item 2 waits for item 0: one component of both, though their links differ; an item
    that crosses no link is a component of its own."""
    items, links = incidence([[0], [1], [2], []])
    parts = split(4, items, links, 3, (np.array([2]), np.array([0])))
    assert parts.label.tolist() == [0, 1, 0, 2]
    assert parts.links(2).tolist() == [] and parts.numbers(2).tolist() == []


def test_twins_take_the_first_equal_key_and_spread_renames_links():
    """Items 0 and 1 walk links (0, 1) and (3, 2): the same walk up to renaming 0->3, 1->2.
    With equal keys the second is a copy: its item value is the first's, and link 3 carries
    what link 0 carried, link 2 what link 1 carried."""
    items, links = incidence([[0, 1], [3, 2]])
    parts = split(2, items, links, 4)
    found = parts.twins([parts.numbers(c).tobytes() for c in range(parts.n)])
    assert found.twin == (0, 0) and found.distinct() == [0] and found.copied
    (value,), (carried,) = found.spread({0: (np.array([2.5]),)},
                                        {0: (np.array([10.0, 20.0, 0.0, 0.0]),)}, 2, 4)
    assert value.tolist() == [2.5, 2.5] and carried.tolist() == [10.0, 20.0, 20.0, 10.0]


def test_replicated_clusters_equal_the_reference_run():
    """Dimension 1 of DeviceMesh(8, 8) on an 8 x 8 torus: 8 link-disjoint rings, alike; one
    is timed and copied: the group times are the reference run's bit for bit, the link bytes
    to rounding (the solver behind the copy adds a link's bytes in another order)."""
    topology = torus(dims=(8, 8))
    groups = DeviceMesh(8, 8).groups(1)
    fast = run_collective(topology, "all_reduce", "ring", groups, 1e6)
    plain = run_collective(topology, "all_reduce", "ring", groups, 1e6, engine="reference")
    assert fast.path.startswith("replicated+") and plain.path == "reference"
    assert fast.group_time_s == plain.group_time_s
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-12)
