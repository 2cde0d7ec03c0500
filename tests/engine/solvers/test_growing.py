"""Arrays that grow at their end (atpsim/engine/solvers/growing.py) and the nodes a live
episode's loop grows (GrowingNodes): the same arrays as concatenating each time."""

import numpy as np
import pytest

from atpsim.engine.solvers.flow_network import GrowingNodes, Nodes
from atpsim.engine.solvers.growing import Column


def test_column_appends_keep_values_and_writes():
    column = Column(np.zeros(0), np.int64)
    view = column.extend(np.array([1, 2, 3]))
    view[0] = 7  # writes go through to the buffer
    for k in range(40):
        view = column.extend(np.array([k]))
    assert view.dtype == np.int64
    assert view.tolist() == [7, 2, 3, *range(40)]
    assert len(column) == 43 and len(column.buffer) >= 43


def _nodes(n_links: int, n: int, offset: float) -> Nodes:
    """*n* nodes, node i crossing links 0..i % n_links and waiting for node i - 1."""
    lens = np.arange(n) % n_links + 1
    link_ptr = np.concatenate([[0], np.cumsum(lens)])
    link_idx = np.concatenate([np.arange(k) for k in lens])
    dep_ptr = np.concatenate([[0], np.arange(n)])
    return Nodes(link_ptr, link_idx, offset + np.arange(n, dtype=float), np.full(n, 2.0 + offset),
                 np.arange(n) % 3, np.full(n, offset), dep_ptr, np.arange(n - 1))


def test_growing_nodes_equal_then():
    parts = [_nodes(3, n, float(k)) for k, n in enumerate((4, 1, 7, 2))]
    grown, joined = GrowingNodes(), None
    for part in parts:
        got = grown.append(part)
        joined = part if joined is None else joined.then(part)
        for name in Nodes.__dataclass_fields__:
            assert np.array_equal(getattr(got, name), getattr(joined, name)), name
    assert len(got) == 14 and got.dep_idx[-1] == 12  # the last part's second node waits for node 12


def test_next_completion_is_found_again_after_the_clock_moves():
    """One flow of 1 GB on a 1 GB/s link: it ends at 1 s whether the loop is asked before or
    after its clock is moved to 0.25 s (the kept next completion is relative to the clock)."""
    from atpsim.engine.routes import PairRoutes
    from atpsim.engine.solvers.flow_loop import JOINT, Loop
    from atpsim.engine.solvers.flow_network import Fabric

    routes = PairRoutes(2, np.array([1]), np.array([0]), np.array([1]), np.array([0, 1]),
                        np.array([0]), np.zeros(1), np.array([1e9]))  # fmt: skip
    loop = Loop(Fabric.plain(np.array([1e9])), JOINT)
    loop.extend(Nodes.of(routes, np.array([0]), np.array([1e9]), (np.zeros(2, np.int64), np.zeros(0, np.int64))))
    loop.run_until(0.0)
    assert loop.next_time() == pytest.approx(1.0, rel=1e-12)
    loop.run_until(0.25)
    assert loop.next_time() == pytest.approx(1.0, rel=1e-12)
    loop.run()
    assert loop.finish.tolist() == pytest.approx([1.0], rel=1e-12)
