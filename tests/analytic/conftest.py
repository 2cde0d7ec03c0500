"""Hand-built systems of the paper's Figure 7 with the paper's own numbers (no builder), as fixtures."""

import itertools

import networkx as nx
import pytest

from atpsim.topology.graph import Topology

#: The paper's per-NVLink figure (Section 3.4: "4 NVLinks, each providing 50 GB/s"); it is the
#: bidirectional NVLink3 number, used here as given so that the matrix reads as in Figure 7(a).
PAPER_NVLINK_BPS = 50e9
HDR_BPS = 25e9  # 200 Gb/s HDR InfiniBand, per direction
PCIE_BPS = 31.5e9


def figure_7a(nodes=4, gpus_per_node=4):
    """Figure 7(a): each GPU pair of a node joined by 4 NVLinks of 50 GB/s (one 200 GB/s edge),
    every GPU on its node's NIC over PCIe (a slower side path the matrix must ignore), each NIC
    on one HDR switch at 25 GB/s."""
    graph = nx.Graph()
    graph.add_node("ib", kind="switch")
    for node in range(nodes):
        ranks = range(node * gpus_per_node, (node + 1) * gpus_per_node)
        nic = f"nic{node}"
        graph.add_node(nic, kind="nic")
        graph.add_edge(nic, "ib", kind="ib", bandwidth_Bps=HDR_BPS)
        for rank in ranks:
            graph.add_node(f"g{rank}", kind="gpu", rank=rank)
            graph.add_edge(f"g{rank}", nic, kind="pcie", bandwidth_Bps=PCIE_BPS)
        for a, b in itertools.combinations(ranks, 2):
            graph.add_edge(f"g{a}", f"g{b}", kind="nvlink", bandwidth_Bps=4 * PAPER_NVLINK_BPS)
    return Topology("figure-7a", graph)


def torus_by_hand(rows, cols, link_Bps=25e9):
    """A rows x cols torus built without the builder and without ``coords``: rank r*cols + c."""
    graph = nx.Graph()
    for rank in range(rows * cols):
        graph.add_node(f"t{rank}", kind="gpu", rank=rank)
    for r, c in itertools.product(range(rows), range(cols)):
        here = r * cols + c
        for other in (r * cols + (c + 1) % cols, ((r + 1) % rows) * cols + c):
            if other != here:
                graph.add_edge(f"t{here}", f"t{other}", kind="torus", bandwidth_Bps=link_Bps)
    return Topology(f"torus-by-hand:{rows}x{cols}", graph)


@pytest.fixture
def fig7a():
    return figure_7a()


@pytest.fixture
def hand_torus():
    return torus_by_hand
