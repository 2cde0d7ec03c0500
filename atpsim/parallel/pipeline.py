"""Pipeline-parallel schedules: the order in which each stage runs its micro-batches' forward
and backward passes.

A model of ``p`` stages (each on its own devices) trains ``m`` micro-batches per step. Each
stage runs the ops of its list in order; an op also waits for its input from the neighbouring
stage (forward from the stage before, backward from the stage after). The schedules are the
ones Megatron-LM runs (Narayanan et al., "Efficient Large-Scale Language Model Training on
GPU Clusters Using Megatron-LM", SC'21, Section 2.2):

- ``gpipe``: every forward, then every backward (Huang et al., GPipe, 2019); holds ``m``
  micro-batches' activations;
- ``1f1b``: ``p - s - 1`` warm-up forwards on stage ``s``, then one forward and one backward
  alternately, then the remaining backwards (PipeDream-Flush); holds at most ``p - s``;
- ``interleaved-1f1b``: each device holds ``v`` model chunks (virtual stages ``c·p + s``),
  which cuts the bubble by ``v`` at the price of ``v`` times the point-to-point traffic;
  ``m`` must be a multiple of ``p``.

With uniform op times and free communication, the bubble (idle time of a stage over the
step) is ``(p - 1)/(m + p - 1)`` of the step for gpipe and 1f1b, and ``(p - 1)/(v·m + p - 1)``
for the interleaved schedule; :mod:`atpsim.engine.step.pipeline` simulates it and the tests
hold it to these closed forms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from atpsim.errors import SimulationError, did_you_mean

Pass = Literal["F", "B"]


@dataclass(frozen=True)
class PipelineOp:
    """One pass of one micro-batch through one model chunk of a stage: *kind* ``"F"``
    (forward) or ``"B"`` (backward), *microbatch* in ``0..m-1``, *chunk* in ``0..v-1``."""

    kind: Pass
    microbatch: int
    chunk: int = 0

    def virtual_stage(self, stage: int, n_stages: int) -> int:
        """The op's place in the model: chunk ``c`` of stage ``s`` is virtual stage ``c·p + s``."""
        return self.chunk * n_stages + stage


@dataclass(frozen=True)
class PipelineShape:
    """*n_stages* devices in a row (p), *n_microbatches* per step (m), *n_chunks* model chunks
    per device (v, 1 unless the schedule is interleaved)."""

    n_stages: int
    n_microbatches: int
    n_chunks: int = 1

    @property
    def n_virtual_stages(self) -> int:
        return self.n_stages * self.n_chunks


Order = Callable[[PipelineShape, int], tuple[PipelineOp, ...]]
_SCHEDULES: dict[str, Order] = {}


def register_schedule(name: str) -> Callable[[Order], Order]:
    """Register *fn(shape, stage) -> ops in order* as the schedule called *name*."""

    def add(fn: Order) -> Order:
        _SCHEDULES[name] = fn
        return fn

    return add


def schedule_names() -> list[str]:
    return sorted(_SCHEDULES)


@lru_cache(maxsize=64)
def stage_orders(name: str, shape: PipelineShape) -> tuple[tuple[PipelineOp, ...], ...]:
    """The op list of every stage under the schedule *name* (checked against *shape*); cached:
    a job asks for it per stage (memory) and per run, and an interleaved schedule of 96
    micro-batches x 12 chunks is ~0.1 s to list."""
    if name not in _SCHEDULES:
        raise SimulationError(f"unknown pipeline schedule {name!r}{did_you_mean(name, _SCHEDULES)}",
                              key="schedule")  # fmt: skip
    check_shape(name, shape)
    return tuple(_SCHEDULES[name](shape, stage) for stage in range(shape.n_stages))


def check_shape(name: str, shape: PipelineShape) -> None:
    """Stages, micro-batches and chunks >= 1; only the interleaved schedule has chunks > 1,
    and it needs a multiple of ``p`` micro-batches."""
    for key, value in (("pp", shape.n_stages), ("micro_batches", shape.n_microbatches),
                       ("virtual_stages", shape.n_chunks)):  # fmt: skip
        if value < 1:
            raise SimulationError(f"expected {key} >= 1, got {value}", key=key)
    if shape.n_chunks > 1 and name != "interleaved-1f1b":
        raise SimulationError(f"schedule {name!r} runs one model chunk per stage; "
                              "virtual stages need 'interleaved-1f1b'", key="virtual_stages")  # fmt: skip
    if name == "interleaved-1f1b" and shape.n_microbatches % shape.n_stages:
        raise SimulationError(
            f"the interleaved schedule needs micro-batches ({shape.n_microbatches}) to be a "
            f"multiple of the pipeline stages ({shape.n_stages})", key="micro_batches")


@register_schedule("gpipe")
def gpipe(shape: PipelineShape, stage: int) -> tuple[PipelineOp, ...]:
    """All forwards in micro-batch order, then all backwards, last micro-batch first."""
    m = shape.n_microbatches
    return tuple(PipelineOp("F", i) for i in range(m)) + tuple(
        PipelineOp("B", i) for i in reversed(range(m))
    )


@register_schedule("1f1b")
def one_forward_one_backward(shape: PipelineShape, stage: int) -> tuple[PipelineOp, ...]:
    """``min(p - s - 1, m)`` warm-up forwards, then forward i + warm-up and backward i
    alternately, then the backwards left."""
    m = shape.n_microbatches
    warmup = min(shape.n_stages - stage - 1, m)
    ops = [PipelineOp("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        ops += [PipelineOp("F", warmup + i), PipelineOp("B", i)]
    ops += [PipelineOp("B", i) for i in range(m - warmup, m)]
    return tuple(ops)


@register_schedule("interleaved-1f1b")
def interleaved(shape: PipelineShape, stage: int) -> tuple[PipelineOp, ...]:
    """Megatron-LM's interleaved schedule: the k-th forward of a stage is micro-batch
    :func:`_interleaved_op` (groups of ``p`` micro-batches through chunk 0, then chunk 1, ...),
    with ``2(p - s - 1) + (v - 1)p`` warm-up forwards, then 1F1B, then the backwards left."""
    p, v = shape.n_stages, shape.n_chunks
    total = shape.n_microbatches * v
    warmup = total if shape.n_microbatches == p else min(2 * (p - stage - 1) + (v - 1) * p, total)
    ops = [_interleaved_op("F", k, p, v) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [_interleaved_op("F", warmup + k, p, v), _interleaved_op("B", k, p, v)]
    ops += [_interleaved_op("B", k, p, v) for k in range(total - warmup, total)]
    return tuple(ops)


def _interleaved_op(kind: Pass, k: int, p: int, v: int) -> PipelineOp:
    """The k-th forward (backward) of a device: chunk ``(k // p) mod v`` (backwards run the
    chunks in reverse), micro-batch ``(k // (p·v))·p + k mod p``."""
    chunk = (k // p) % v
    microbatch = (k // (p * v)) * p + k % p
    return PipelineOp(kind, microbatch, chunk if kind == "F" else v - 1 - chunk)
