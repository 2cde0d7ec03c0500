"""The compiled joint loop's component search (joint_rates._component) is the reference's
(FlowNetwork._component): the same flows reachable from the changed links, round for round,
so a component that grows past MAX_EXPAND_ROUNDS rounds is every flow in both, and one that
closes a round earlier is only itself. On random flow sets and on chains of flows that take
one round per flow, as written and compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from atpsim.engine.solvers import joint_rates
from atpsim.engine.solvers.flow_network import MAX_EXPAND_ROUNDS, FlowNetwork
from atpsim.engine.solvers.joint_layout import FIRST, FLAG, LINK, MARK, N_ACTIVE, N_INC, N_LINKS

N_LINKS_MAX = 40


def _reference(flow_links: list[list[int]], n_links: int, seed: list[int]) -> np.ndarray:
    """FlowNetwork._component's mask on these flows (every flow where it answers None)."""
    owner = np.array([a for a, links in enumerate(flow_links) for _ in links], dtype=np.int64)
    link = np.array([x for links in flow_links for x in links], dtype=np.int64)
    net = SimpleNamespace(capacity=np.ones(n_links), active=np.arange(len(flow_links)), owner=owner, link=link)
    mask = FlowNetwork._component(net, np.array(seed, dtype=np.int64))  # type: ignore[arg-type]
    return np.ones(len(flow_links), dtype=bool) if mask is None else mask


def _compiled_layout(flow_links: list[list[int]], n_links: int, seed: list[int], component) -> np.ndarray:
    """*component* (joint_rates._component, plain or compiled) on the loop's arrays of these
    flows with the *seed* links flagged changed; it must clear the flags and its marks."""
    n, m = len(flow_links), sum(map(len, flow_links))
    ni, inc = np.zeros((5, max(n, 1)), dtype=np.int64), np.zeros((2, max(m, 1)), dtype=np.int64)
    li, s = np.zeros((5, n_links), dtype=np.int64), np.zeros(15, dtype=np.int64)
    e = 0
    for a, links in enumerate(flow_links):
        ni[FIRST, a] = e
        for x in links:
            inc[LINK, e] = x
            e += 1
    li[FLAG, seed] = 1
    s[N_ACTIVE], s[N_INC], s[N_LINKS] = n, m, n_links
    mask = component(ni, inc, li, s)
    assert not li[FLAG].any() and not li[MARK].any()
    return mask


def _components():
    plain = getattr(joint_rates._component, "py_func", joint_rates._component)
    out = [plain]
    from atpsim.engine.solvers import joint_kernel

    if joint_kernel.compiled() is not None:
        from numba import njit

        out.append(njit(plain))
    return out


def _chain(length: int) -> list[list[int]]:
    """Flow i on links i and i + 1: from link 0, one more flow each round."""
    return [[i, i + 1] for i in range(length)] + [[N_LINKS_MAX - 1]]  # and one flow apart


@pytest.mark.parametrize("component", _components())
@pytest.mark.parametrize("length", [1, MAX_EXPAND_ROUNDS - 2, MAX_EXPAND_ROUNDS - 1, MAX_EXPAND_ROUNDS,
                                    MAX_EXPAND_ROUNDS + 1, MAX_EXPAND_ROUNDS + 5])  # fmt: skip
def test_a_chain_of_flows_is_found_round_for_round(component, length):
    flows = _chain(length)
    got = _compiled_layout(flows, N_LINKS_MAX, [0], component)
    want = _reference(flows, N_LINKS_MAX, [0])
    assert np.array_equal(got, want)
    assert got[-1] == (length >= MAX_EXPAND_ROUNDS)  # past the rounds: every flow, the one apart too


@pytest.mark.parametrize("component", _components())
@pytest.mark.parametrize("seed", range(60))
def test_random_flow_sets_give_the_references_component(component, seed):
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(4, N_LINKS_MAX))
    flows = [sorted(rng.choice(n_links, int(rng.integers(1, 4)), replace=False).tolist())
             for _ in range(int(rng.integers(1, 30)))]  # fmt: skip
    changed = sorted(set(rng.choice(n_links, int(rng.integers(1, 4))).tolist()))
    assert np.array_equal(_compiled_layout(flows, n_links, changed, component), _reference(flows, n_links, changed))
