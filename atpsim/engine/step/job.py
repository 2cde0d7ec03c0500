"""A whole training iteration on one pipeline replica: the pipeline's forwards and backwards,
then each stage's data-parallel gradient synchronisation and optimizer step.

Each stage ``s`` runs its ops (:mod:`atpsim.engine.step.pipeline`) with per-op times that
already hold the stage's tensor-parallel communication (each op is a pass program simulated on
its TP mesh). The stage's gradients are synchronised over its data-parallel group in buckets,
on the communication stream, in the order the backward produces them (the last layer's
first, as PyTorch DDP and Megatron-LM do):

- with *overlap*, bucket ``k`` is issued when the last backward of the stage has produced it,
  ``ready_k = start + fraction_k·(finish - start)`` of that backward (gradients accumulate over
  the micro-batches, so only the last backward's share can overlap);
- without, every bucket is issued when the last backward finishes;
- buckets run one after another: ``finish_k = max(ready_k, finish_{k-1}) + bucket_s[k]``.

Then the optimizer step (memory-bound, on the compute stream) and, with a sharded optimizer
(ZeRO-1), the all-gather of the updated parameters. The iteration ends when every stage is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from atpsim.engine.step.pipeline import OpTime, PipelineTimeline, TransferTime, simulate_pipeline
from atpsim.parallel.pipeline import PipelineOp, PipelineShape


@dataclass(frozen=True)
class GradientSync:
    """One stage's data-parallel work after its backwards: *bucket_s* the duration of each
    bucket's collective in issue order, *ready_fraction* the share of the last backward done
    when each bucket is ready (non-decreasing, the last 1.0), *optimizer_s* the optimizer
    step, *gather_s* the parameter all-gather of a sharded optimizer (0 without)."""

    bucket_s: tuple[float, ...] = ()
    ready_fraction: tuple[float, ...] = ()
    overlap: bool = True
    optimizer_s: float = 0.0
    gather_s: float = 0.0


@dataclass(frozen=True)
class StageEnd:
    """When a stage's last backward ends, its gradients are synchronised, its step is done."""

    backward_end_s: float
    sync_end_s: float
    end_s: float

    @property
    def exposed_sync_s(self) -> float:
        """Gradient synchronisation not hidden under the backward."""
        return self.sync_end_s - self.backward_end_s


@dataclass(frozen=True)
class JobTimeline:
    """The pipeline's timeline and each stage's end."""

    pipeline: PipelineTimeline
    stages: tuple[StageEnd, ...]

    @property
    def step_time_s(self) -> float:
        return max(stage.end_s for stage in self.stages)

    def critical_stage(self) -> int:
        """The stage that finishes last (the lowest such stage, for determinism)."""
        ends = [stage.end_s for stage in self.stages]
        return ends.index(max(ends))


def simulate_iteration(
    orders: Sequence[Sequence[PipelineOp]],
    shape: PipelineShape,
    op_time: OpTime,
    transfer_s: TransferTime | None,
    sync: Sequence[GradientSync],
) -> JobTimeline:
    """Time one iteration: the pipeline, then every stage's *sync* (one per stage)."""
    pipeline = simulate_pipeline(orders, shape, op_time, transfer_s)
    ends = tuple(_stage_end(pipeline, s, sync[s]) for s in range(shape.n_stages))
    return JobTimeline(pipeline, ends)


def _stage_end(pipeline: PipelineTimeline, stage: int, sync: GradientSync) -> StageEnd:
    start, finish = pipeline.start_s[stage][-1], pipeline.finish_s[stage][-1]
    stream_free = 0.0
    for bucket_s, fraction in zip(sync.bucket_s, sync.ready_fraction, strict=True):
        ready = start + fraction * (finish - start) if sync.overlap else finish
        stream_free = max(ready, stream_free) + bucket_s
    sync_end = max(stream_free, finish)
    return StageEnd(finish, sync_end, sync_end + sync.optimizer_s + sync.gather_s)
