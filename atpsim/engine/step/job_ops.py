"""Pipeline ops as their pass programs' own tasks: every rank of the stage's TP mesh runs the
pass on its compute and communication streams, and each TP collective is a comm task of the
call over every TP group of the job, so its flows meet the pipeline's and the gradients'.

Used where a stage's TP traffic shares links with other traffic (an ATP mesh whose
dimension 2 crosses the NICs, TP groups that share a switch's uplinks); where it meets nothing
the pass is one delay of its time alone (:func:`pass_delays`), exact and far smaller.

An op is a list of :class:`Part` s run one after another: a program (the layers' pass, the
embedding's or the LM head's, a forward recomputed in backward) with a delay after it (the
profile's per-layer overhead), or a plain delay (the attention core recomputed). Inside a
program, a task on a rank waits for its dependencies on that rank and for the previous task
of its stream on that rank; a collective on a group waits for all of that on every member.

Where a pass's collectives span replicas (an MoE layer's dispatch and combine, all-to-alls
over the expert-parallel group: ranks of one stage and TP position in ``ep`` replicas; ring
attention's sends around a context-parallel group, whose ``cp`` ranks run as ``cp``
pipelines), the op is built in every replica at once (:meth:`ProgramOps.together`): each
task of the program for every replica in turn, and such a collective as one comm task per
group, waiting for every member in every replica.

Folded (*fold_ranks*, an unperturbed job): every TP rank of a stage runs the same compute,
so one rank's tasks stand for all of them and each TP collective is one uniform comm task over
every group of its dimension (each group a copy: it is exact where all end at one instant,
which the engine checks), in every one of the *fold* replicas where the graph builds replica 0
only (*fold* > 0, :mod:`atpsim.engine.step.job_graph`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.graph import GraphBuilder, Template
from atpsim.errors import SimulationError
from atpsim.parallel.context import CP_DIM
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.pipeline import PipelineOp
from atpsim.program import CommOp, ComputeOp, StepProgram


@dataclass(frozen=True)
class Part:
    """A *program* followed by *after_s* seconds on every rank, or (no program) a delay of
    *after_s* on every rank."""

    program: StepProgram | None
    after_s: float = 0.0


def pass_delays(seconds: Callable[[int, int, PipelineOp], float]):
    """The op builder of passes that meet nothing: one delay of ``seconds(replica, stage, op)``."""

    def build(b: GraphBuilder, replica: int, stage: int, op: PipelineOp, deps: list[int]
              ) -> tuple[int, int, float]:
        duration = seconds(replica, stage, op)
        task = b.delay(duration, deps, (f"r{replica} s{stage}", f"{op.kind}{op.microbatch}"))
        return task, task, duration

    return build


@dataclass(frozen=True)
class ProgramOps:
    """The op builder of passes as tasks (module docstring): *parts(stage, op)* the op's
    parts; *ranks(replica, stage)* the stage's GPUs in TP position order; *mesh* the TP mesh;
    *compute_s(op)* a compute op's time and *scale[rank]* each GPU's slowdown; *call(op)* the
    call over every TP group of the job and *group_offset(replica, stage)* the index of the
    stage's first group of each dimension in it; *seconds(replica, stage, op)* the op's time
    alone (where its gradient buckets' readiness is measured); for collectives that span
    replicas (:meth:`together`), *spans(op)* whether *op* is one, *across(op)* its call over
    every such group of the job, *replicas* the job's and *across_groups(stage)* the groups
    of *stage*: for each, its index in the call and its members as (replica, TP position);
    *fold_ranks*: one TP rank built for all, and *fold* > 0 replica 0 for that many (module
    docstring; every GPU's *scale* must then be 1)."""

    parts: Callable[[int, PipelineOp], Sequence[Part]]
    ranks: Callable[[int, int], Sequence[int]]
    mesh: DeviceMesh
    compute_s: Callable[[ComputeOp], float]
    scale: np.ndarray
    call: Callable[[CommOp], CallSpec]
    group_offset: Callable[[int, int], int]
    seconds: Callable[[int, int, PipelineOp], float]
    spans: Callable[[CommOp], bool] = lambda op: False
    across: Callable[[CommOp], CallSpec] | None = None
    replicas: int = 1
    across_groups: Callable[[int], Sequence[tuple[int, Sequence[tuple[int, int]]]]] | None = None
    fold: int = 0
    fold_ranks: bool = False
    _templates: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.fold and not self.fold_ranks:
            raise SimulationError("a job folded over its replicas is folded over its TP ranks too")
        if self.fold_ranks and not np.all(self.scale == 1.0):
            raise SimulationError("a folded job's GPUs all compute at the nominal speed (scale 1)")

    def __call__(self, b: GraphBuilder, replica: int, stage: int, op: PipelineOp, deps: list[int]
                 ) -> tuple[int, int, float]:
        track, name = f"r{replica} s{stage}", f"{op.kind}{op.microbatch}"
        start = b.delay(0.0, deps, (track, f"{name} start"))
        end = start
        for part in self.parts(stage, op):
            if part.program is not None:
                end = self._program(b, replica, stage, part.program, end, (track, f"{name} end"))
            if part.after_s or part.program is None:
                ranks = self.ranks(replica, stage)
                scale = max(float(self.scale[r]) for r in ranks)
                end = b.delay(part.after_s * scale, [end], (track, f"{name} end"))
        return start, end, self.seconds(replica, stage, op)

    def together(self, b: GraphBuilder, stage: int, op: PipelineOp, deps: list[list[int]]
                 ) -> list[tuple[int, int, float]]:
        """*op* of *stage* in every replica at once, each after its *deps* (module docstring)."""
        name = f"{op.kind}{op.microbatch}"
        replicas = range(self.replicas)
        starts = [b.delay(0.0, deps[r], (f"r{r} s{stage}", f"{name} start")) for r in replicas]
        ends = list(starts)
        for part in self.parts(stage, op):
            if part.program is not None:
                ends = self._programs(b, stage, part.program, ends, name)
            if part.after_s or part.program is None:
                for r in replicas:
                    scale = max(float(self.scale[g]) for g in self.ranks(r, stage))
                    ends[r] = b.delay(part.after_s * scale, [ends[r]], (f"r{r} s{stage}", f"{name} end"))
        return [(starts[r], ends[r], self.seconds(r, stage, op)) for r in replicas]

    def _programs(self, b: GraphBuilder, stage: int, program: StepProgram, starts: list[int],
                  name: str) -> list[int]:
        """:meth:`_program` in every replica at once, task by task; a collective that spans
        replicas is one comm task per group (:meth:`_across`). Each replica's end task."""
        replicas = range(self.replicas)
        ranks = [list(self.ranks(r, stage)) for r in replicas]
        size = len(ranks[0])
        last = [{"compute": [starts[r]] * size, "comm": [starts[r]] * size} for r in replicas]
        node: list[dict[int, list[int]]] = [{} for _ in replicas]
        for task in program.tasks:
            if isinstance(task.op, ComputeOp):
                seconds = self.compute_s(task.op)
                ids = [[b.delay(seconds * float(self.scale[ranks[r][pos]]),
                                [node[r][d][pos] for d in task.deps] + [last[r]["compute"][pos]])
                        for pos in range(size)] for r in replicas]  # fmt: skip
            elif self.spans(task.op):
                ids = self._across(b, stage, task.op, task.deps, node, [last[r]["comm"] for r in replicas])
            else:
                ids = [self._collective(b, r, stage, task.op, task.deps, node[r], last[r]["comm"])
                       for r in replicas]  # fmt: skip
            for r in replicas:
                node[r][task.id] = ids[r]
                last[r][task.stream] = ids[r]
        return [b.delay(0.0, last[r]["compute"] + last[r]["comm"], (f"r{r} s{stage}", f"{name} end"))
                for r in replicas]  # fmt: skip

    def _across(self, b: GraphBuilder, stage: int, op: CommOp, deps: tuple[int, ...],
                node: list[dict[int, list[int]]], stream: list[list[int]]) -> list[list[int]]:
        """One comm task per group of *op* that spans replicas, in *stage*: it waits for every
        member's dependencies and stream in every replica. Each replica's members' nodes."""
        if self.across is None or self.across_groups is None:
            raise SimulationError(f"{op.name}: a collective across replicas needs the job's groups")
        call = b.call(self.across(op))
        ids = [list(s) for s in stream]
        for index, (group, members) in enumerate(self.across_groups(stage)):
            waits = [node[r][d][pos] for r, pos in members for d in deps] + [stream[r][pos] for r, pos in members]
            label = (f"{'cp' if op.dim == CP_DIM else 'ep'} s{stage}", op.name) if index == 0 else None
            task = b.comm(call, [group], waits, label)
            for r, pos in members:
                ids[r][pos] = task
        return ids

    def _program(self, b: GraphBuilder, replica: int, stage: int, program: StepProgram, start: int,
                 label: tuple[str, str]) -> int:
        """The program's tasks on every rank of the stage after task *start*; its end task
        (named *label* in a trace: the pass spans from its ``start`` task to its last
        ``end``). Unlabelled, built once per (program, replica, stage) and spliced after
        that (:class:`~atpsim.engine.joint.graph.Template`)."""
        if b.labelled:
            return self._program_tasks(b, replica, stage, program, start, label)
        key = (id(program), replica, stage)
        known = self._templates.get(key)
        if known is None or known[0] is not program:
            scratch = GraphBuilder()
            self._program_tasks(scratch, replica, stage, program, scratch.delay(0.0), None)
            known = self._templates[key] = (program, Template.record(scratch))
        return b.splice(known[1], start)

    def _program_tasks(self, b: GraphBuilder, replica: int, stage: int, program: StepProgram, start: int,
                       label: tuple[str, str] | None) -> int:
        """:meth:`_program`, task by task."""
        ranks = list(self.ranks(replica, stage))
        size = 1 if self.fold_ranks else len(ranks)
        last = {"compute": [start] * size, "comm": [start] * size}
        node: dict[int, list[int]] = {}
        for task in program.tasks:
            if isinstance(task.op, ComputeOp):
                seconds = self.compute_s(task.op)
                ids = [b.delay(seconds * float(self.scale[ranks[pos]]),
                               [node[d][pos] for d in task.deps] + [last["compute"][pos]])
                       for pos in range(size)]  # fmt: skip
            else:
                ids = self._collective(b, replica, stage, task.op, task.deps, node, last["comm"])
            node[task.id] = ids
            last[task.stream] = ids
        return b.delay(0.0, last["compute"] + last["comm"], label)

    def _collective(self, b: GraphBuilder, replica: int, stage: int, op: CommOp,
                    deps: tuple[int, ...], node: dict[int, list[int]], stream: list[int]) -> list[int]:
        """One comm task per group of the op's dimension in this stage; each member's node
        (folded: one uniform task, :meth:`_folded`)."""
        local = self.mesh.groups(op.dim)
        call = b.call(self.call(op))
        if self.fold_ranks:
            return self._folded(b, replica, stage, call, len(local), op.name, deps, node, stream)
        offset = self.group_offset(replica, stage) * len(local)
        ids = list(stream)
        for index, group in enumerate(local):
            waits = [node[d][pos] for pos in group for d in deps] + [stream[pos] for pos in group]
            label = (f"tp r{replica} s{stage}", op.name) if index == 0 else None
            task = b.comm(call, [offset + index], waits, label)
            for pos in group:
                ids[pos] = task
        return ids

    def _folded(self, b: GraphBuilder, replica: int, stage: int, call: int, n_local: int, name: str,
                deps: tuple[int, ...], node: dict[int, list[int]], stream: list[int]) -> list[int]:
        """The folded collective: every group of the dimension (*n_local* a stage) in
        *replica* (every replica where they are folded), each its own copy (block 1), after
        rank 0's dependencies and stream."""
        replicas = range(self.fold) if self.fold else (replica,)
        groups = [self.group_offset(r, stage) * n_local + index for r in replicas for index in range(n_local)]
        waits = [node[d][0] for d in deps] + [stream[0]]
        return [b.comm(call, groups, waits, (f"tp s{stage}", name), block=1)]
