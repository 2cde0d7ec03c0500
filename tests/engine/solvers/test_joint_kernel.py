"""The compiled joint loop (atpsim/engine/solvers/joint_loop.py over joint_kernel.py) is the
reference loop (flow_loop.Loop in the JOINT order) bit for bit: the same start and finish of
every node, the same nodes done in the same order, the same bytes and busy time per link and
the same number of rate solves, on random flow sets grown while they run and merged into one
another (weighted and plain max-min). tests/engine/joint/test_growing_live.py runs a growing
live episode on both loops."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from atpsim.api import compile_joint_loop
from atpsim.engine.solvers import event_loop, joint_kernel
from atpsim.engine.solvers.flow_loop import JOINT, Loop
from atpsim.engine.solvers.flow_network import Fabric, Nodes
from atpsim.engine.solvers.joint_loop import CompiledLoop, joint_loop
from atpsim.engine.solvers.loop_choice import (
    BUSY,
    BUSY_EVENTS,
    COMPILED,
    PREDICT_AFTER,
    counted,
    loop_choice,
)

N_LINKS = 12


def _nodes(rng: np.random.Generator, n: int, release_s: float, links: np.ndarray | None = None) -> Nodes:
    """*n* random nodes: 0-3 links each (0: a delay of its latency; of *links*, default every
    link), latencies that tie, sizes that tie, two protocols, release times from
    *release_s*, dependencies on earlier nodes."""
    links = np.arange(N_LINKS) if links is None else links
    lens = rng.integers(0, min(4, len(links) + 1), n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    idx = np.concatenate([rng.choice(links, k, replace=False) for k in lens]).astype(np.int64)
    deps = [sorted(set(rng.choice(i, min(i, int(rng.integers(0, 3))), replace=False).tolist())) if i else []
            for i in range(n)]  # fmt: skip
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(d) for d in deps], out=dep_ptr[1:])
    return Nodes(ptr, idx, rng.choice([0.0, 1e-6, 2e-6, 5e-7], n), rng.choice([1e3, 1e6, 5e5, 2.5e6], n),
                 rng.integers(0, 2, n), release_s + rng.choice([0.0, 1e-5, 3e-4], n), dep_ptr,
                 np.array([x for d in deps for x in d], dtype=np.int64))  # fmt: skip


def _history(make, fabric: Fabric, seed: int) -> tuple:
    """Everything observable of a loop made by *make*: grown at 0 and 1e-4 s, advanced to
    5e-5 and 1.5e-4 s, another loop (started at 0, advanced to 1.5e-4 s) merged in, run to
    its end."""
    rng = np.random.default_rng(seed)
    first, second, third = _nodes(rng, 40, 0.0), _nodes(rng, 30, 1e-4), _nodes(rng, 25, 2e-4)
    loop, other = make(fabric), make(fabric)
    loop.extend(first)
    loop.run_until(5e-5)
    done = [loop.take_done()]
    loop.extend(second)
    loop.run_until(1.5e-4)
    done.append(loop.take_done())
    other.extend(third)
    other.run_until(1.5e-4)
    done.append(other.take_done())
    loop.absorb(other)
    finished = loop.run()
    done.append(loop.take_done())
    return (finished, loop.start.copy(), loop.finish.copy(), done, *loop.link_counts(), loop.n_events, loop.n_done)


def _fabric(seed: int) -> Fabric:
    rng = np.random.default_rng(1000 + seed)
    weight = rng.choice([1.0, 1.25, 2.0], (2, 2)) if seed % 2 == 0 else None
    return Fabric(rng.choice([1e9, 2e9, 5e8], N_LINKS), rng.integers(0, 2, N_LINKS), weight)


def _assert_identical(got: tuple, want: tuple) -> None:
    finished, start, finish, done, link_bytes, busy, events, n_done = got
    assert finished == want[0] and events == want[6] and n_done == want[7]
    assert np.array_equal(start, want[1], equal_nan=True) and np.array_equal(finish, want[2], equal_nan=True)
    assert len(done) == len(want[3]) and all(np.array_equal(a, b) for a, b in zip(done, want[3], strict=True))
    assert np.array_equal(link_bytes, want[4]) and np.array_equal(busy, want[5])


@pytest.mark.parametrize("seed", range(6))
def test_the_plain_python_kernel_is_the_reference_loop(seed):
    fabric = _fabric(seed)
    want = _history(lambda f: Loop(f, JOINT), fabric, seed)
    assert want[0] and want[6] > 0  # every node done, rates solved
    with np.errstate(divide="ignore", invalid="ignore"):  # numpy scalars: a flow just joined has rate 0
        got = _history(lambda f: CompiledLoop(f, 0.0, joint_kernel.plain()), fabric, seed)
    _assert_identical(got, want)


def test_the_compiled_kernel_is_the_reference_loop():
    functions = joint_kernel.compiled()
    if functions is None:  # pragma: no cover - numba is a dependency
        pytest.skip("numba is not installed")
    for seed in range(40):
        fabric = _fabric(seed)
        _assert_identical(_history(lambda f: CompiledLoop(f, 0.0, functions), fabric, seed),
                          _history(lambda f: Loop(f, JOINT), fabric, seed))  # fmt: skip


def test_every_entry_point_is_compiled_machine_code():
    """Each function a CompiledLoop calls is a numba dispatcher, the event loop `run` too (it
    was left out of the compiled names once, and ran as Python calling compiled steps: the
    numbers the same, each event slower)."""
    functions = joint_kernel.compiled()
    if functions is None:  # pragma: no cover - numba is a dependency
        pytest.skip("numba is not installed")
    from numba.core.registry import CPUDispatcher

    assert set(functions) == set(joint_kernel.ENTRY)
    assert [n for n, f in functions.items() if not isinstance(f, CPUDispatcher)] == []


def test_joint_loop_is_compiled_as_chosen_unless_the_reference_is_asked_for(monkeypatch):
    fabric = _fabric(1)
    compiled = CompiledLoop if joint_kernel.compiled() else Loop
    assert isinstance(joint_loop(fabric), Loop)  # outside loop_choice: the reference
    with loop_choice(COMPILED):
        assert isinstance(joint_loop(fabric), compiled)
    with loop_choice(BUSY):
        assert isinstance(joint_loop(fabric), Loop)
        counted(Loop(fabric, JOINT), -BUSY_EVENTS)  # as if a loop had made that many solves
        assert isinstance(joint_loop(fabric), compiled)
        monkeypatch.setattr(event_loop, "use_kernel", False)
        assert isinstance(joint_loop(fabric, 2.0), Loop) and joint_loop(fabric, 2.0).now == 2.0


class _Solves(Loop):
    """A reference loop that claims *n* rate solves (to count them as a run would)."""

    def __init__(self, fabric: Fabric, n: int):
        super().__init__(fabric, JOINT)
        self.n_events = n


def test_a_run_on_course_to_busy_goes_compiled_early_and_stays(monkeypatch):
    """With the run's progress told, the busy choice goes compiled after PREDICT_AFTER rate
    solves where the pace since the first (solves per task ended) over the tasks left comes
    to BUSY_EVENTS; a run whose solves came in one burst stays on the reference's, and once
    compiled the choice holds whatever the pace does after."""
    monkeypatch.setattr(event_loop, "use_kernel", True)
    fabric = _fabric(1)
    compiled = CompiledLoop if joint_kernel.compiled() else Loop
    progress = {"ended": 1_000, "total": 100_000}
    with loop_choice(BUSY, lambda: (progress["ended"], progress["total"])):
        counted(_Solves(fabric, 1), 0)  # the first solve, at 1,000 tasks ended
        progress["ended"] = 1_000 + 50_000  # half the tasks since: on course to ~2 x these solves
        counted(_Solves(fabric, PREDICT_AFTER - 2), 0)
        assert isinstance(joint_loop(fabric), Loop)  # PREDICT_AFTER - 1 solves: not judged yet
        counted(_Solves(fabric, 1), 0)
        assert isinstance(joint_loop(fabric), Loop)  # on course to ~2 x 200, far from BUSY_EVENTS
        progress["ended"] = 1_000 + 100  # the same solves over 100 tasks: on course to ~200,000
        assert isinstance(joint_loop(fabric), compiled)
        progress["ended"] = 99_999  # the pace falls: once busy, busy
        assert isinstance(joint_loop(fabric), compiled)
    with loop_choice(BUSY):  # no progress told: only BUSY_EVENTS solves make it busy
        counted(_Solves(fabric, BUSY_EVENTS - 1), 0)
        assert isinstance(joint_loop(fabric), Loop)
        counted(_Solves(fabric, 1), 0)
        assert isinstance(joint_loop(fabric), compiled)


@pytest.mark.parametrize("steps", [0, 3, 17, 40])
def test_a_compiled_loop_takes_over_a_reference_loop_where_it_stands(steps):
    """CompiledLoop.adopt between two steps of a reference loop (flows in flight, arrivals
    queued, nodes done not taken yet), then the merge and the rest of the history: the same
    as the reference loop all the way."""
    functions = joint_kernel.compiled()
    if functions is None:  # pragma: no cover - numba is a dependency
        pytest.skip("numba is not installed")
    for seed in range(12):
        fabric = _fabric(seed)

        def make(f: Fabric, steps: int = steps) -> Loop | CompiledLoop:
            return _Adopting(f, functions, steps)

        _assert_identical(_history(make, fabric, seed), _history(lambda f: Loop(f, JOINT), fabric, seed))


class _Adopting:
    """A reference loop that a compiled one takes over after *steps* steps of its first run."""

    def __init__(self, fabric: Fabric, functions, steps: int):
        self.loop: Loop | CompiledLoop = Loop(fabric, JOINT)
        self.functions, self.steps = functions, steps

    def __getattr__(self, name):
        return getattr(self.loop, name)

    def __len__(self) -> int:
        return len(self.loop)

    def run_until(self, t: float) -> None:
        if isinstance(self.loop, Loop):
            while self.steps and self.loop.n_done < len(self.loop) and self.loop.next_time() <= t:
                self.loop.step()
                self.steps -= 1
            self.loop = CompiledLoop.adopt(self.loop, self.functions)
        self.loop.run_until(t)

    def absorb(self, other) -> int:
        return self.loop.absorb(other.loop)


def test_compile_joint_loop_runs_every_entry_point():
    """atpsim.api.compile_joint_loop (what bench/bench_layouts.py runs first) runs each entry
    point on a few flows where numba is installed (True) and says False where it is not."""
    assert compile_joint_loop() == (joint_kernel.compiled() is not None)


def test_the_kernels_name_the_layout_they_are_written_for():
    """numba caches the loop's machine code by its source files, not by the layout's
    constants it imports: joint_kernel.py and joint_rates.py each carry the layout's
    fingerprint, so a change to joint_layout.py fails here until both files change with it
    (and numba compiles them again; with a cache from before, the loop wrote past the links'
    rows)."""
    from atpsim.engine.solvers import joint_layout, joint_rates

    assert joint_kernel.LAYOUT == joint_rates.LAYOUT == joint_layout.fingerprint()


def test_the_loop_names_the_rate_solve_it_is_built_with():
    """The loop's cached machine code (joint_kernel.py's) carries its own copy of the rate
    solve (joint_rates.py): an edit there fails here until joint_kernel.py says the new
    source's hash, so the loop is compiled again with it."""
    from atpsim.engine.solvers import joint_rates

    source = Path(joint_rates.__file__).read_bytes()
    assert joint_kernel.RATES == hashlib.sha1(source).hexdigest()[:12]
