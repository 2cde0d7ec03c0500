"""The compiled kernel's state in less memory (issue 28): the bytes each link will carry are
summed a chunk of pairs at a time, the same sums as one pass over every route link, and the
incidence slots are 32-bit wherever their values fit."""

import numpy as np
import pytest

import atpsim.engine.solvers.flow_kernel as kernel


def one_pass(route_ptr, route_links, per_pair, n_links):
    """What :func:`_state` computed before: every route link at once."""
    return np.bincount(route_links, weights=np.repeat(per_pair, np.diff(route_ptr)),
                       minlength=n_links)


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 16])
def test_pending_bytes_chunk_by_chunk_are_the_sums_of_one_pass(chunk, monkeypatch):
    monkeypatch.setattr(kernel, "PEND_CHUNK_PAIRS", chunk)
    rng = np.random.default_rng(7)
    n_pairs, n_links = 200, 50
    lengths = rng.integers(0, 9, n_pairs)  # routes of no link included (a GPU to itself)
    route_ptr = np.concatenate([[0], np.cumsum(lengths)])
    route_links = rng.integers(0, n_links, int(lengths.sum())).astype(np.int32)
    per_pair = rng.uniform(0, 2**30, n_pairs)
    found = kernel._pending_bytes(route_ptr, route_links, per_pair, n_links)
    assert np.allclose(found, one_pass(route_ptr, route_links, per_pair, n_links),
                       rtol=1e-12, atol=0)
    assert found.sum() == pytest.approx(float((per_pair * lengths).sum()), rel=1e-12)


def test_the_state_holds_the_pending_bytes_and_32_bit_slots():
    """Two flows on pair 0 (links 0, 1) and one on pair 1 (link 1): link 0 will carry 3 B,
    link 1 3 + 4 B, link 2 nothing; 3 incidences, slots of 32 bits."""
    route_ptr = np.array([0, 2, 3])
    route_links = np.array([0, 1, 1], dtype=np.int32)
    state = kernel._state(route_ptr, route_links, np.array([0, 0, 1]), np.array([1.0, 2.0, 4.0]),
                          3)
    lflt, slots = state[5], state[8]
    assert lflt[kernel.PEND].tolist() == [3.0, 7.0, 0.0]
    assert slots.shape == (3, 5) and slots.dtype == np.int32


def test_slots_widen_only_past_32_bits():
    assert kernel.slot_dtype(10**6, 2**31 - 1) is np.int32
    assert kernel.slot_dtype(10**6, 2**31) is np.int64
    assert kernel.slot_dtype(2**31, 10) is np.int64
