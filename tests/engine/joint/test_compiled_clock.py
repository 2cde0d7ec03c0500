"""The compiled task clock (atpsim/engine/joint/clock_kernel.py, tasks.CompiledClock) is the
Python one (tasks.TaskClock with the engine's _alone_fast) bit for bit: on job graphs, folded
and not, with episodes that merge and go live, every task's start and end, every link's bytes
and busy time, every call's interval and the engine's counts are the same, whichever loops
the episodes run on; its heap pops in heapq's order; and it runs the lone calls itself once
it knows their kind (the engine does not see them again)."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint import clock_kernel, engine
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import COMM, NotUniform
from atpsim.engine.joint.tasks import CompiledClock
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.job import JobConfig, check_job, joint_job, load_machine

TINY = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)


def _config(tp, pp, dp, global_batch, **options):
    c = JobConfig(TINY, ParallelLayout(DeviceMesh(*tp), pp, dp), 1, global_batch, **options)
    check_job(c)
    return c


CASES = [
    ("ib-cluster:4x8", _config((4, 1), 2, 4, 16, zero=1), "replicas"),  # TP inside a node, ZeRO-1 buckets
    ("ib-cluster:4x8", _config((4, 1), 2, 4, 16, schedule="interleaved-1f1b", virtual_stages=2,
                               sequence_parallel=True, zero=1), "replicas"),
    ("ib-cluster:4x8", _config((8, 1), 2, 2, 8, zero=1, vocab=4096), "none"),
    ("ib-cluster:4x4,nics_per_node=2", _config((2, 1), 2, 4, 16, zero=1), "replicas"),  # shared NICs
]  # fmt: skip


def _assert_same(got, want):
    for a, b in ((got.start_s, want.start_s), (got.finish_s, want.finish_s), (got.link_bytes, want.link_bytes),
                 (got.link_busy_s, want.link_busy_s)):  # fmt: skip
        assert np.array_equal(a, b, equal_nan=True)
    assert got.stats == want.stats
    assert len(got.calls) == len(want.calls)
    for (s1, e1, l1), (s2, e2, l2) in zip(got.calls, want.calls, strict=True):
        assert s1 == s2 and e1 == e2 and np.array_equal(l1, l2)


@pytest.mark.parametrize("spec, job_config, fold", CASES)
@pytest.mark.parametrize("compiled", [None, False])
def test_the_compiled_clock_is_the_python_clock_bit_for_bit(spec, job_config, fold, compiled):
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, fold=fold)
    want = run_graph(job.graph, job.machine, links=True, compiled=compiled, clock=False)
    got = run_graph(job.graph, job.machine, links=True, compiled=compiled, clock=True)
    assert want.stats["calls_alone"] > 0 and want.stats["episodes_solved"] + want.stats["live_replays"] > 0
    _assert_same(got, want)


def test_the_clock_runs_lone_calls_of_known_kinds_itself(monkeypatch):
    """The engine times a kind of lone call once; the clock runs the later ones (the engine's
    _alone_fast sees fewer calls than the run counts alone)."""
    spec, job_config, fold = CASES[0]
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, fold=fold)
    seen = []
    alone_fast = engine._Comm._alone_fast
    monkeypatch.setattr(engine._Comm, "_alone_fast", lambda comm, *a: seen.append(1) or alone_fast(comm, *a))
    run = run_graph(job.graph, job.machine, clock=True)
    assert 0 < len(seen) < run.stats["calls_alone"] / 2


@pytest.mark.parametrize("case", [0, 1])
def test_the_engine_times_each_kind_of_lone_call_once(monkeypatch, case):
    """A kind is (call, groups, block) with the groups compared by value: tasks whose groups
    are equal tuples built apart are one kind, so the engine's _alone_fast sees at most one
    lone task of each (by identity the 512-H100 job's 60 kinds were 15,596, and 13,531 of its
    lone calls went to the engine)."""
    spec, job_config, fold = CASES[case]
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, fold=fold)
    graph = job.graph
    blocks = graph.uniform if graph.uniform is not None else np.zeros(len(graph), dtype=np.int64)

    def kind(task: int) -> tuple:
        return int(graph.call[task]), graph.groups[task], int(blocks[task])

    comm = np.flatnonzero(graph.kind == COMM).tolist()
    assert len({kind(t) for t in comm}) < len({(*kind(t)[::2], id(graph.groups[t])) for t in comm})
    seen = []
    alone_fast = engine._Comm._alone_fast

    def spied(comm, shape, groups, owned, now):
        if len(owned) == 1:  # a lone task: its kind is learned
            seen.append(kind(owned[0][0]))
        return alone_fast(comm, shape, groups, owned, now)

    monkeypatch.setattr(engine._Comm, "_alone_fast", spied)
    run = run_graph(graph, job.machine, clock=True)
    assert seen and len(set(seen)) == len(seen) < run.stats["calls_alone"]  # no kind timed twice


def test_the_clock_as_written_is_the_compiled_one(monkeypatch):
    """The kernel's functions run as plain Python (no numba) give the same run."""
    spec, job_config, fold = CASES[1]
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, fold=fold)
    want = run_graph(job.graph, job.machine, links=True, clock=False)
    monkeypatch.setattr(clock_kernel, "compiled", clock_kernel.plain)
    _assert_same(run_graph(job.graph, job.machine, links=True, clock=True), want)


def test_the_compiled_clock_refuses_a_folded_graph_whose_copies_part():
    """TP 8 over two 4-GPU nodes folded over replicas: the copies are not in step, and the
    compiled clock's run says so as the Python one does."""
    job_config = _config((8, 1), 2, 2, 8)
    topology, profile = load_machine("ib-cluster:8x4", job_config.layout.size, None)
    folded = joint_job(topology, profile, job_config, fold="replicas")
    with pytest.raises(NotUniform):
        run_graph(folded.graph, folded.machine, clock=True)


def test_the_heap_pops_in_heapqs_order():
    """Times that tie, pushed and popped interleaved: the (time, sequence) order heapq keeps."""
    rng = np.random.default_rng(3)
    heap, iv = clock_kernel.empty_heap(512), np.zeros(6, dtype=np.int64)
    reference: list[tuple[float, int, int, int]] = []
    got, want = [], []
    for step in range(600):
        if reference and rng.random() < 0.45:
            got.append(clock_kernel.pop(*heap, iv))
            t, _, task, version = heapq.heappop(reference)
            want.append((t, task, version))
        else:
            t, task = float(rng.integers(0, 20)) / 4, int(rng.integers(0, 50))
            clock_kernel.push(*heap, iv, t, task, step)
            heapq.heappush(reference, (t, int(iv[clock_kernel.SEQ]), task, step))
    assert got == want and int(iv[clock_kernel.HEAP_N]) == len(reference)


def test_a_large_graph_takes_the_compiled_clock_by_default(monkeypatch):
    spec, job_config, fold = CASES[0]
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, fold=fold)
    assert not isinstance(engine._clock(job.graph, None), CompiledClock)
    monkeypatch.setattr(engine, "CLOCK_TASKS", len(job.graph))
    expected = CompiledClock if clock_kernel.compiled() else engine.TaskClock
    assert isinstance(engine._clock(job.graph, None), expected)
    assert not isinstance(engine._clock(job.graph, False), CompiledClock)


def test_compile_clock_runs_every_entry_point():
    """clock_kernel.compile_clock (part of atpsim.api.compile_joint_loop) runs each entry
    point on two tasks where numba is installed (True)."""
    assert clock_kernel.compile_clock() == (clock_kernel.compiled() is not None)


def test_the_clock_names_the_task_kinds_it_is_written_for():
    """numba caches the clock's machine code by clock_kernel.py, not by the kinds it imports
    from graph.py: the file names them, held here to the graph's."""
    from atpsim.engine.joint import graph

    assert clock_kernel.KINDS == (graph.DELAY, graph.MARKER, graph.COMM)
