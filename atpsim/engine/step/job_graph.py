"""A whole training iteration as one task graph: every replica's pipeline, its sends, each
stage's gradient buckets and optimizer, run together on one network
(:mod:`atpsim.engine.joint`).

The same iteration as :func:`atpsim.engine.step.job.simulate_iteration`, with the calls kept
as calls instead of durations, so that traffic of different calls in flight shares links:

- every (replica, stage) runs its op list in order; an op is a delay (its TP pass, where the
  pass's traffic is proven to meet nothing else) or the pass's own tasks (an
  :data:`OpBuilder` decides); a forward of virtual stage ``k > 0`` waits for the send of its
  activations from ``k - 1``, a backward for the send of the gradients from ``k + 1`` (sends
  do not block the sender: each is its own comm task, started when its producer ends);
- each stage's gradient buckets are one call each over the stage's data-parallel groups, on
  the stage's data-parallel stream (one after another); bucket ``k`` waits for every
  replica's marker ``fraction_k`` of the way through its last backward (with overlap) or for
  the backward's end (without);
- the tied embedding's all-reduce (first and last stage) follows both stages' buckets; then
  every replica's optimizer step and, with ZeRO-1, the parameter all-gather.

Where no two calls meet on a link, every number is the one
:func:`~atpsim.engine.step.job.simulate_iteration` computes from the calls' own times.

*Folded* (``JobCalls.fold``, an unperturbed job): the replicas run the same schedule on
shifted copies of one another's GPUs, so only replica 0 is built and each of its comm tasks
stands for every replica's (:mod:`atpsim.engine.joint.graph`: a uniform task, exact where
every copy ends at one instant, which the engine checks); the data-parallel calls, which span
the replicas, wait for replica 0's readiness, which is every replica's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.graph import GraphBuilder, GraphTimeline, TaskGraph
from atpsim.engine.step.job import JobTimeline, StageEnd
from atpsim.engine.step.pipeline import PipelineTimeline
from atpsim.errors import SimulationError
from atpsim.parallel.pipeline import PipelineOp, PipelineShape

#: Adds one op of (replica, stage) after *deps*: ``(builder, replica, stage, op, deps) ->
#: (start task, end task, its duration alone in s)`` (the duration places the buckets'
#: readiness markers).
OpBuilder = Callable[[GraphBuilder, int, int, PipelineOp, list[int]], tuple[int, int, float]]
#: Adds one op of a stage in every replica at once, each after its *deps*: ``(builder, stage,
#: op, deps per replica) -> (start, end, duration alone) per replica``; for passes whose
#: collectives span replicas (an MoE layer's all-to-all over the expert-parallel group).
OpsBuilder = Callable[[GraphBuilder, int, PipelineOp, list[list[int]]], list[tuple[int, int, float]]]


@dataclass(frozen=True)
class StageCalls:
    """One stage's data-parallel work: a call per gradient bucket (issue order, every DP group
    of the stage), the share of the last backward done when each is ready, *overlap*, the
    optimizer step (s) and the ZeRO-1 parameter all-gather (None without); *expert_gather*,
    the experts' parameter all-gather over their own data-parallel groups (expert
    parallelism), after it."""

    buckets: tuple[CallSpec, ...] = ()
    ready_fraction: tuple[float, ...] = ()
    overlap: bool = True
    optimizer_s: float = 0.0
    gather: CallSpec | None = None
    expert_gather: CallSpec | None = None


@dataclass(frozen=True)
class JobCalls:
    """The iteration's work for :func:`build_job_graph`: the stages' op lists (*orders*) in
    *shape*, *replicas* pipelines, *tp* GPUs per stage, *op* (an :data:`OpBuilder`), *send*
    ``(src stage, dst stage) -> call`` whose groups are every replica's pairs, replica-major
    (None: no transfer), *stages* (one :class:`StageCalls` each) and the tied embedding's
    all-reduce (*tied*, pairs of the first and last stage, replica-major; None without);
    *together*, where the passes' collectives span replicas, builds each op in every replica
    at once (an :data:`OpsBuilder`, used instead of *op*: the replicas' pipelines are then
    built in step, op by op); *fold* > 0: the graph is folded (module docstring), its one
    built replica standing for *fold*."""

    orders: tuple[tuple[PipelineOp, ...], ...]
    shape: PipelineShape
    replicas: int
    tp: int
    op: OpBuilder
    send: Callable[[int, int], CallSpec | None]
    stages: tuple[StageCalls, ...]
    tied: CallSpec | None = None
    together: OpsBuilder | None = None
    fold: int = 0


@dataclass(frozen=True)
class JobTasks:
    """Task ids of the graph: *op_start[r][s][i]*, *op_end[r][s][i]* of op ``i`` of stage
    ``s`` in replica ``r``; per stage, the gradient stream's end (*sync_end*) and the stage's
    end (*stage_end*, per replica)."""

    op_start: tuple[tuple[tuple[int, ...], ...], ...]
    op_end: tuple[tuple[tuple[int, ...], ...], ...]
    sync_end: tuple[int, ...]
    stage_end: tuple[tuple[int, ...], ...]


def build_job_graph(job: JobCalls, labelled: bool = False) -> tuple[TaskGraph, JobTasks]:
    """The iteration *job* as one task graph (module docstring)."""
    if job.fold and (job.replicas != 1 or job.together is not None):
        raise SimulationError(f"a folded job builds one replica op by op; got {job.replicas} replicas"
                              f"{' built together' if job.together is not None else ''}")  # fmt: skip
    b = GraphBuilder(labelled)
    starts, ends, seconds = _pipelines(b, job)
    syncs = [_buckets(b, job, s, starts, ends, seconds) for s in range(job.shape.n_stages)]
    syncs = _tied(b, job, syncs, ends)
    sync_end, stage_end = [], []
    for s, sync in enumerate(job.stages):
        last_backwards = [ends[r][s][-1] for r in range(job.replicas)]
        done = b.delay(0.0, syncs[s] + last_backwards, ("sync", f"stage {s} gradients done"))
        sync_end.append(done)
        opt = [b.delay(sync.optimizer_s, [done], (f"r{r} s{s}", "optimizer")) for r in range(job.replicas)]
        if sync.gather is not None:
            gather = b.comm(b.call(sync.gather), range(len(sync.gather.groups)), opt,
                            (f"dp s{s}", "parameter all-gather"))  # fmt: skip
            opt = [gather] * job.replicas
        if sync.expert_gather is not None:
            gather = b.comm(b.call(sync.expert_gather), range(len(sync.expert_gather.groups)), opt,
                            (f"edp s{s}", "expert parameter all-gather"))  # fmt: skip
            opt = [gather] * job.replicas
        stage_end.append(tuple(opt))
    tasks = JobTasks(_freeze(starts), _freeze(ends), tuple(sync_end), tuple(stage_end))
    return b.build(), tasks


def _freeze(table: list[list[list[int]]]) -> tuple[tuple[tuple[int, ...], ...], ...]:
    return tuple(tuple(tuple(row) for row in stage) for stage in table)


def _pipelines(b: GraphBuilder, job: JobCalls
               ) -> tuple[list[list[list[int]]], list[list[list[int]]], list[list[list[float]]]]:
    """Every replica's ops, each after its stage's previous op and its input's send."""
    if job.together is not None:
        return _pipelines_together(b, job, job.together)
    p, n = job.shape.n_stages, job.replicas
    starts = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[int]]]
    ends = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[int]]]
    seconds = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[float]]]
    for r in range(n):
        done: dict[tuple[str, int, int], int] = {}
        while any(len(ends[r][s]) < len(job.orders[s]) for s in range(p)):
            progressed = False
            for s in range(p):
                while len(ends[r][s]) < len(job.orders[s]):
                    op = job.orders[s][len(ends[r][s])]
                    source = _input(b, job, r, s, op, done)
                    if source is None:
                        break
                    deps = source + ends[r][s][-1:]
                    first, last, alone = job.op(b, r, s, op, deps)
                    starts[r][s].append(first)
                    ends[r][s].append(last)
                    seconds[r][s].append(alone)
                    done[(op.kind, op.microbatch, op.virtual_stage(s, p))] = last
                    progressed = True
            if not progressed:
                raise SimulationError("the pipeline schedule waits on itself (no stage can go on)")
    return starts, ends, seconds


def _pipelines_together(b: GraphBuilder, job: JobCalls, together: OpsBuilder
                        ) -> tuple[list[list[list[int]]], list[list[list[int]]], list[list[list[float]]]]:
    """:func:`_pipelines` with each op built in every replica at once (*together*): the
    replicas run the same schedule, so an op's input is ready in all of them or in none."""
    p, n = job.shape.n_stages, job.replicas
    starts = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[int]]]
    ends = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[int]]]
    seconds = [[[] for _ in range(p)] for _ in range(n)]  # type: list[list[list[float]]]
    done: list[dict[tuple[str, int, int], int]] = [{} for _ in range(n)]
    while any(len(ends[0][s]) < len(job.orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while len(ends[0][s]) < len(job.orders[s]):
                op = job.orders[s][len(ends[0][s])]
                sources = [_input(b, job, r, s, op, done[r]) for r in range(n)]
                if any(source is None for source in sources):
                    break
                deps = [source + ends[r][s][-1:] for r, source in enumerate(sources)]  # type: ignore[operator]
                for r, (first, last, alone) in enumerate(together(b, s, op, deps)):
                    starts[r][s].append(first)
                    ends[r][s].append(last)
                    seconds[r][s].append(alone)
                    done[r][(op.kind, op.microbatch, op.virtual_stage(s, p))] = last
                progressed = True
        if not progressed:
            raise SimulationError("the pipeline schedule waits on itself (no stage can go on)")
    return starts, ends, seconds


def _input(b: GraphBuilder, job: JobCalls, replica: int, stage: int, op: PipelineOp,
           done: dict[tuple[str, int, int], int]) -> list[int] | None:
    """The task *op*'s input waits for ([] for none; None: its producer is not built yet)."""
    p, last = job.shape.n_stages, job.shape.n_virtual_stages - 1
    k = op.virtual_stage(stage, p)
    if op.kind == "F":
        if k == 0:
            return []
        source, key = (k - 1) % p, ("F", op.microbatch, k - 1)
    elif k == last:
        key = ("F", op.microbatch, k)
        return [done[key]] if key in done else None
    else:
        source, key = (k + 1) % p, ("B", op.microbatch, k + 1)
    if key not in done:
        return None
    call = job.send(source, stage) if source != stage else None
    if call is None:
        return [done[key]]
    label = (f"send s{source}->s{stage}", f"{op.kind}{op.microbatch} r{replica}")
    if job.fold:  # every replica's pairs; each replica's send is a block of its tp pairs
        return [b.comm(b.call(call), range(job.fold * job.tp), [done[key]], label, block=job.tp)]
    groups = range(replica * job.tp, (replica + 1) * job.tp)
    return [b.comm(b.call(call), groups, [done[key]], label)]


def _buckets(b: GraphBuilder, job: JobCalls, stage: int, starts: list, ends: list,
             seconds: list) -> list[int]:
    """The stage's gradient buckets, one after another; each waits for its markers."""
    sync = job.stages[stage]
    chain: list[int] = []
    for k, (call, fraction) in enumerate(zip(sync.buckets, sync.ready_fraction, strict=True)):
        ready = []
        for r in range(job.replicas):
            if sync.overlap:
                deps = list(b.deps_of(starts[r][stage][-1]))
                ready.append(b.marker(fraction, seconds[r][stage][-1], deps, (f"r{r} s{stage}", f"bucket {k} ready")))
            else:
                ready.append(ends[r][stage][-1])
        chain = [b.comm(b.call(call), range(len(call.groups)), ready + chain, (f"dp s{stage}", f"bucket {k}"))]
    return chain


def _tied(b: GraphBuilder, job: JobCalls, syncs: list[list[int]], ends: list) -> list[list[int]]:
    """The tied embedding's all-reduce after the first and the last stage's buckets (and
    their last backwards): one call over both stages' pairs."""
    if job.tied is None:
        return syncs
    first, last = 0, job.shape.n_stages - 1
    deps = syncs[first] + syncs[last] + [ends[r][s][-1] for r in range(job.replicas) for s in (first, last)]
    tied = b.comm(b.call(job.tied), range(len(job.tied.groups)), deps, ("dp tied", "embedding all-reduce"))
    out = [list(chain) for chain in syncs]
    out[first], out[last] = [tied], [tied]
    return out


def job_timeline(timeline: GraphTimeline, tasks: JobTasks, orders: Sequence[Sequence[PipelineOp]]
                 ) -> tuple[JobTimeline, int]:
    """The iteration as :class:`~atpsim.engine.step.job.JobTimeline` seen from the replica
    whose stage ends last (the lowest such replica), and that replica."""
    start, finish = timeline.start_s, timeline.finish_s
    n = len(tasks.op_end)
    ends = [max(float(finish[t]) for t in (tasks.stage_end[s][r] for s in range(len(tasks.sync_end))))
            for r in range(n)]  # fmt: skip
    r = ends.index(max(ends))
    pipeline = PipelineTimeline(
        tuple(map(tuple, orders)),
        tuple(tuple(float(start[t]) for t in stage) for stage in tasks.op_start[r]),
        tuple(tuple(float(finish[t]) for t in stage) for stage in tasks.op_end[r]))
    stages = tuple(StageEnd(float(finish[tasks.op_end[r][s][-1]]), float(finish[tasks.sync_end[s]]),
                            float(finish[tasks.stage_end[s][r]])) for s in range(len(tasks.sync_end)))
    return JobTimeline(pipeline, stages), r
