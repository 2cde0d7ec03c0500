"""Small hand-built topologies for the engine tests (networkx graphs, custom links)."""

import networkx as nx
import pytest

from atpsim.topology.graph import Topology


def star(p, bandwidth_Bps=100e9, latency_s=1e-6, slow=None):
    """p GPUs on one non-blocking switch; *slow* = (rank, bandwidth) gives one GPU a slower link.

    A transfer crosses two links (up, down): path latency 2 * latency_s.
    """
    g = nx.Graph()
    g.add_node("sw", kind="switch")
    for r in range(p):
        g.add_node(f"g{r}", kind="gpu", rank=r)
        bw = slow[1] if slow and slow[0] == r else bandwidth_Bps
        g.add_edge(f"g{r}", "sw", kind="custom", bandwidth_Bps=bw, latency_s=latency_s)
    return Topology(f"star{p}", g)


def two_switches(per_switch, bandwidth_Bps=100e9, uplink_Bps=100e9, latency_s=1e-6):
    """Two switches of *per_switch* GPUs each (ranks 0.. on A, then B), joined by one uplink."""
    g = nx.Graph()
    g.add_node("A", kind="switch")
    g.add_node("B", kind="switch")
    g.add_edge("A", "B", kind="custom", bandwidth_Bps=uplink_Bps, latency_s=latency_s)
    for r in range(2 * per_switch):
        g.add_node(f"g{r}", kind="gpu", rank=r)
        g.add_edge(f"g{r}", "A" if r < per_switch else "B", kind="custom",
                   bandwidth_Bps=bandwidth_Bps, latency_s=latency_s)
    return Topology(f"two_switches{per_switch}", g)


def tree(leaves, per_leaf, bandwidths, latency_s=1e-7):
    """A root switch over *leaves* leaf switches of *per_leaf* GPUs; link i's bandwidth cycles
    through *bandwidths* (so routes have uneven bottlenecks)."""
    g = nx.Graph()
    g.add_node("root", kind="switch")
    i = 0
    for leaf in range(leaves):
        g.add_node(f"L{leaf}", kind="switch")
        g.add_edge(f"L{leaf}", "root", kind="custom", bandwidth_Bps=bandwidths[i % len(bandwidths)], latency_s=latency_s)
        i += 1
        for k in range(per_leaf):
            r = leaf * per_leaf + k
            g.add_node(f"g{r}", kind="gpu", rank=r)
            g.add_edge(f"g{r}", f"L{leaf}", kind="custom", bandwidth_Bps=bandwidths[i % len(bandwidths)], latency_s=latency_s)
            i += 1
    return Topology(f"tree{leaves}x{per_leaf}", g)


@pytest.fixture
def make_star():
    return star


@pytest.fixture
def make_two_switches():
    return two_switches


@pytest.fixture
def make_tree():
    return tree
