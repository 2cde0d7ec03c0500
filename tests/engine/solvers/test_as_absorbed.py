"""CompiledLoop.as_absorbed puts a loop in place in the state a fresh loop reaches by absorbing
it (atpsim/engine/solvers/joint_loop.py): every array the loop reads, every scalar, and then
the same history to the end with a newcomer added (what a live episode made of one replayed
episode does next)."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.engine.solvers import joint_kernel
from atpsim.engine.solvers import joint_layout as k
from atpsim.engine.solvers.flow_network import Fabric
from atpsim.engine.solvers.joint_loop import CompiledLoop
from tests.engine.solvers.test_joint_kernel import N_LINKS, _nodes


def _replayed(functions, fabric: Fabric, seed: int, now: float) -> CompiledLoop:
    """A loop as replay leaves one: members added at its start (the later ones' links first
    met later, so they are numbered out of fabric order), run to *now*, its nodes done taken."""
    rng = np.random.default_rng(seed)
    loop = CompiledLoop(fabric, 0.0, functions)
    for start, links in ((0.0, np.arange(6, 12)), (2e-5, np.arange(0, 8)), (4e-5, np.arange(3, 10))):
        loop.extend(_nodes(rng, 12, start, links), rng.integers(0, 3, 12))
    loop.run_until(now)
    loop.take_done()
    return loop


def _state(loop: CompiledLoop) -> dict[str, np.ndarray]:
    """Every part of the loop's state that a later step reads (scratch rows left out)."""
    n, links, heap = len(loop), int(loop.s[k.N_LINKS]), int(loop.s[k.N_HEAP])
    active, inc = int(loop.s[k.N_ACTIVE]), int(loop.s[k.N_INC])
    on = loop.li[k.ON_LINK, :links] > 0
    segments = [loop.buf[k.IDS, a:a + b] for a, b in zip(loop.hi[k.SEG_START, :heap], loop.hi[k.SEG_LEN, :heap],
                                                           strict=True)]  # fmt: skip
    return {
        "scalars": loop.s.copy(), "clock": loop.clock.copy(), "used": loop.used.copy(), "local": loop.local.copy(),
        "nf": loop.nf[:, :n].copy(), "ni": loop.ni[[k.PROTOCOL, k.WAITING, k.GROUP], :n].copy(),
        "active": loop.ni[[k.ACTIVE, k.FIRST], :active].copy(),
        "link_ptr": loop.link_ptr[:n + 1].copy(), "node_links": loop.node_links[:loop.link_ptr[n]].copy(),
        "dptr": loop.dptr[:n + 1].copy(), "didx": loop.didx[:loop.dptr[n]].copy(),
        "inc": loop.inc[[k.OWNER, k.LINK], :inc].copy(), "incw": loop.incw[:inc].copy(),
        "lf": loop.lf[[k.CAP, k.BUSY, k.BYTES], :links].copy(), "since": loop.lf[k.BUSY_SINCE, :links][on].copy(),
        "li": loop.li[[k.CLASS, k.ON_LINK, k.FLAG, k.MARK], :links].copy(),
        "heap": loop.ht[:heap].copy(), "seq": loop.hi[k.SEQ, :heap].copy(),
        "segments": np.concatenate(segments) if segments else np.zeros(0, dtype=np.int64),
        "segment_lens": loop.hi[k.SEG_LEN, :heap].copy(),
        "groups_left": loop.buf[k.GROUP_LEFT, :int(loop.s[k.N_GROUPS])].copy(),
        "harvested": np.array([loop._harvested]),
    }  # fmt: skip


def _history(loop: CompiledLoop, seed: int) -> tuple:
    """A newcomer added now, then every event to the end: what is observable."""
    rng = np.random.default_rng(10_000 + seed)
    loop.extend(_nodes(rng, 10, loop.now, np.arange(N_LINKS)))
    finished = loop.run()
    return finished, loop.start.copy(), loop.finish.copy(), loop.take_done(), *loop.link_counts(), loop.n_events


def _functions(compiled: bool):
    functions = joint_kernel.compiled() if compiled else joint_kernel.plain()
    if functions is None:  # pragma: no cover - numba is a dependency
        pytest.skip("numba is not installed")
    return functions


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_a_loop_as_absorbed_is_a_fresh_loop_that_absorbed_it(seed: int, compiled: bool) -> None:
    functions = _functions(compiled)
    rng = np.random.default_rng(500 + seed)
    weight = rng.choice([1.0, 1.25, 2.0], (2, 2)) if seed % 2 == 0 else None
    fabric = Fabric(rng.choice([1e9, 2e9, 5e8], N_LINKS), rng.integers(0, 2, N_LINKS), weight)
    now = float(rng.choice([3e-5, 5e-5, 8e-5]))
    with np.errstate(divide="ignore", invalid="ignore"):  # the plain functions on numpy scalars
        absorbed = CompiledLoop(fabric, now, functions)
        absorbed.absorb(_replayed(functions, fabric, seed, now))
        settled = _replayed(functions, fabric, seed, now)
        assert not np.array_equal(np.sort(settled.used), settled.used)  # links to renumber
        settled.as_absorbed()
        got, want = _state(settled), _state(absorbed)
        assert got.keys() == want.keys()
        for name in want:
            assert np.array_equal(got[name], want[name], equal_nan=True), name
        after, expected = _history(settled, seed), _history(absorbed, seed)
    assert after[0] and expected[0]
    for a, b in zip(after, expected, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_a_compacted_loop_is_not_settled() -> None:
    loop = CompiledLoop(Fabric(np.ones(2), np.zeros(2, dtype=np.int64), None), 0.0, _functions(True))
    loop.compacted = True
    with pytest.raises(AssertionError, match="links"):
        loop.as_absorbed()
