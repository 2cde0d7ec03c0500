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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.graph import GraphBuilder
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
    alone (where its gradient buckets' readiness is measured)."""

    parts: Callable[[int, PipelineOp], Sequence[Part]]
    ranks: Callable[[int, int], Sequence[int]]
    mesh: DeviceMesh
    compute_s: Callable[[ComputeOp], float]
    scale: np.ndarray
    call: Callable[[CommOp], CallSpec]
    group_offset: Callable[[int, int], int]
    seconds: Callable[[int, int, PipelineOp], float]

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

    def _program(self, b: GraphBuilder, replica: int, stage: int, program: StepProgram, start: int,
                 label: tuple[str, str]) -> int:
        """The program's tasks on every rank of the stage after task *start*; its end task
        (named *label* in a trace: the pass spans from its ``start`` task to its last
        ``end``)."""
        ranks = list(self.ranks(replica, stage))
        size = len(ranks)
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
        """One comm task per group of the op's dimension in this stage; each member's node."""
        local = self.mesh.groups(op.dim)
        call = b.call(self.call(op))
        offset = self.group_offset(replica, stage) * len(local)
        ids = list(stream)
        for index, group in enumerate(local):
            waits = [node[d][pos] for pos in group for d in deps] + [stream[pos] for pos in group]
            label = (f"tp r{replica} s{stage}", op.name) if index == 0 else None
            task = b.comm(call, [offset + index], waits, label)
            for pos in group:
                ids[pos] = task
        return ids
