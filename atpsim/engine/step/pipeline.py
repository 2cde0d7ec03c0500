"""Run a pipeline schedule: each stage takes its ops in order, each op waits for its input.

Stage ``s`` runs the ops of its list (:func:`atpsim.parallel.pipeline.stage_orders`) one after
another. A forward of virtual stage ``k > 0`` also waits for the same micro-batch's forward on
virtual stage ``k - 1`` plus the transfer of its activations; a backward of ``k`` waits for
the backward of ``k + 1`` plus the transfer of the activation gradients, and the backward of
the last virtual stage for its own forward. Sends do not block the sender (they run on the
communication stream while the stage computes on), so a stage is idle only while it waits
for input: the pipeline bubble is what this produces, not a formula.

    start[op] = max(finish of the stage's previous op, finish[input op] + transfer_s)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from atpsim.errors import SimulationError
from atpsim.parallel.pipeline import PipelineOp, PipelineShape

#: Seconds one op takes on a stage: ``op_time(stage, op)``.
OpTime = Callable[[int, PipelineOp], float]
#: Seconds the input of *op* takes from stage *src* to stage *dst*: ``transfer(src, dst, op)``.
TransferTime = Callable[[int, int, PipelineOp], float]


@dataclass(frozen=True)
class PipelineTimeline:
    """Start and finish (seconds from the step's start) of every op of every stage, in the
    stage's order."""

    orders: tuple[tuple[PipelineOp, ...], ...]
    start_s: tuple[tuple[float, ...], ...]
    finish_s: tuple[tuple[float, ...], ...]

    @property
    def step_time_s(self) -> float:
        """When the last op of the last stage finishes."""
        return max((f[-1] for f in self.finish_s if f), default=0.0)

    def busy_s(self, stage: int) -> float:
        """Seconds *stage* computes."""
        return sum(f - s for s, f in zip(self.start_s[stage], self.finish_s[stage], strict=True))

    def bubble_s(self, stage: int) -> float:
        """Seconds *stage* is idle during the step (waiting for input or for the others)."""
        return self.step_time_s - self.busy_s(stage)

    def bubble_fraction(self, stage: int = 0) -> float:
        """The idle share of the step on *stage*."""
        return self.bubble_s(stage) / self.step_time_s if self.step_time_s > 0 else 0.0


def simulate_pipeline(
    orders: Sequence[Sequence[PipelineOp]],
    shape: PipelineShape,
    op_time: OpTime,
    transfer_s: TransferTime | None = None,
) -> PipelineTimeline:
    """Time the stages' op lists (:func:`~atpsim.parallel.pipeline.stage_orders`) with
    *op_time* and *transfer_s* (0 when None). A schedule whose ops wait on each other in a
    cycle is a :class:`SimulationError`."""
    transfer = transfer_s or (lambda src, dst, op: 0.0)
    p = shape.n_stages
    done: dict[tuple[str, int, int], float] = {}
    start: list[list[float]] = [[] for _ in range(p)]
    finish: list[list[float]] = [[] for _ in range(p)]
    free = [0.0] * p
    while any(len(finish[s]) < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while len(finish[s]) < len(orders[s]):
                op = orders[s][len(finish[s])]
                ready = _input_ready(op, s, shape, done, transfer)
                if ready is None:
                    break
                begin = max(free[s], ready)
                free[s] = begin + op_time(s, op)
                start[s].append(begin)
                finish[s].append(free[s])
                done[(op.kind, op.microbatch, op.virtual_stage(s, p))] = free[s]
                progressed = True
        if not progressed:
            raise SimulationError("the pipeline schedule waits on itself (no stage can go on)")
    return PipelineTimeline(tuple(map(tuple, orders)), tuple(map(tuple, start)),
                            tuple(map(tuple, finish)))  # fmt: skip


def _input_ready(op: PipelineOp, stage: int, shape: PipelineShape,
                 done: dict[tuple[str, int, int], float], transfer: TransferTime) -> float | None:
    """When *op*'s input is on *stage* (None: its producer has not run yet)."""
    p, last = shape.n_stages, shape.n_virtual_stages - 1
    k = op.virtual_stage(stage, p)
    if op.kind == "F":
        if k == 0:
            return 0.0
        source_stage, key = (k - 1) % p, ("F", op.microbatch, k - 1)
    elif k == last:
        return done.get(("F", op.microbatch, k))
    else:
        source_stage, key = (k + 1) % p, ("B", op.microbatch, k + 1)
    if key not in done:
        return None
    return done[key] + transfer(source_stage, stage, op)
