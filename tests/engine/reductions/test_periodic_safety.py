"""The periodic reduction's safety checks, each on a timeline built by hand (issue 11,
section 5): a steady state must hold for several periods, not one; a flow still in flight
across the window must block the extension; and any window it reports must really repeat,
checked here flow by flow without the module's own helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.engine.reductions import periodic


def regular(n_steps: int, flows: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Flow i of step k starts at k + i/10 and takes 1 s: every step repeats the last."""
    start = np.arange(n_steps, dtype=float)[:, None] + np.arange(flows) / 10
    return start, start + 1.0


def test_a_regular_run_is_steady():
    start, finish = regular(12)
    state = periodic.find_steady_state(start, finish)
    assert state is not None and state.period == 1 and state.delta_s == pytest.approx(1.0)


def test_a_few_repeated_periods_are_not_a_steady_state():
    """Steps 1 s apart drift later by k^2/100 s until step 9, then repeat exactly: the window
    that repeats (steps 9..12 before the prefix's unsafe end) holds three periods, fewer than
    the four the module promises (MIN_PERIODS), so no steady state may be declared."""
    drift = np.concatenate([np.arange(10) ** 2 * 0.01, np.full(4, 0.81)])
    start = (np.arange(14) + drift)[:, None] + np.array([0.0, 0.1])
    finish = start + 0.3
    assert periodic.find_steady_state(start, finish) is None
    longer = np.concatenate([drift, np.full(3, 0.81)])
    start = (np.arange(17) + longer)[:, None] + np.array([0.0, 0.1])
    state = periodic.find_steady_state(start, start + 0.3)
    assert state is not None and state.first == 9 and state.delta_s == pytest.approx(1.0)


def test_a_flow_in_flight_across_the_window_blocks_the_extension():
    """Step 0's first flow runs until 10.5 s, across every later step: the later steps repeat
    among themselves, but the run is not periodic while that flow shares their links."""
    start, finish = regular(12)
    finish[0, 0] = 10.5
    assert periodic.find_steady_state(start, finish) is None


def test_a_flow_past_the_prefix_end_is_not_in_the_window():
    """No reported window may hold a step whose flows finish at or after the first finish of
    the prefix's last step (the prefix differs from the full run from then on)."""
    start, finish = regular(16)
    state = periodic.find_steady_state(start, finish)
    assert state is not None
    assert finish[state.last].max() < finish[-1].min()


@st.composite
def timelines(draw):
    """A transient of random steps, then a repeating block of *period* steps."""
    flows = draw(st.integers(1, 3))
    transient = draw(st.integers(0, 6))
    period = draw(st.integers(1, 3))
    reps = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    block_start = rng.uniform(0, 0.5, size=(period, flows)) + np.arange(period)[:, None]
    block_len = rng.uniform(0.5, 1.5, size=(period, flows))
    starts, finishes, t = [], [], 0.0
    for _ in range(transient):
        s = t + rng.uniform(0, 0.5, size=flows)
        starts.append(s)
        finishes.append(s + rng.uniform(0.5, 2.0, size=flows))
        t += 1.0
    for r in range(reps):
        starts.extend(t + r * period + block_start)
        finishes.extend(t + r * period + block_start + block_len)
    return np.array(starts), np.array(finishes)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(timelines())
def test_any_reported_window_repeats_flow_by_flow(case):
    start, finish = case
    state = periodic.find_steady_state(start, finish)
    if state is None:
        return
    p, delta = state.period, state.delta_s
    span = float(finish.max() - start.min())
    tol = 1e-9 * span
    assert state.last - state.first >= periodic.MIN_PERIODS * p
    for k in range(state.first, state.last - p + 1):
        for i in range(start.shape[1]):
            assert abs(start[k + p, i] - start[k, i] - delta) <= tol
            assert abs(finish[k + p, i] - finish[k, i] - delta) <= tol
    assert finish[state.last].max() < finish[-1].min()
    in_flight_until = finish[: state.first + p].max()
    assert start[state.last - p + 1:].min() > in_flight_until + delta - tol
