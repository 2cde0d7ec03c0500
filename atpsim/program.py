"""The per-rank program of a training step: compute and communication tasks with dependencies.

The op types are the contract between the layers that plan a step and the layers that time
it, so they live below both: a layer plan (:mod:`atpsim.parallel.atp`,
:mod:`atpsim.parallel.summa`) emits a :class:`StepProgram`, :mod:`atpsim.compute` times its
:class:`ComputeOp` s, and the step scheduler of the engine runs it on two in-order streams per
rank (compute, comm), like CUDA streams: a task starts when all its dependencies have finished *and* every earlier task of
its stream has finished. Every rank runs the same program (SPMD); communication tasks name
a mesh dimension, and the engine runs that collective on all groups of the dimension at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Stream = Literal["compute", "comm"]


@dataclass(frozen=True)
class ComputeOp:
    """Work on one rank. *kind* 'gemm' is timed by the GEMM model from (m, n, k) and *batch*
    (a batched GEMM, e.g. attention scores over the heads a rank holds); 'memory' is timed as
    memory-bound from *bytes_moved*. *flops* counts 2 per multiply-add. *dtype* is the dtype a
    GEMM runs in where it is not the model's compute dtype (``"fp8"``: a linear layer's GEMM
    under Transformer Engine's FP8 training); None for every other op."""

    name: str
    kind: Literal["gemm", "memory"]
    flops: float = 0.0
    bytes_moved: float = 0.0
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    dtype: str | None = None


@dataclass(frozen=True)
class CommOp:
    """A collective on mesh dimension *dim* (1 or 2 on a :class:`~atpsim.parallel.mesh.DeviceMesh`;
    1 = grid columns, 2 = grid rows, 3 = depth on a :class:`~atpsim.parallel.grid.Grid`).
    *bytes* is each rank's buffer in the nccl-tests convention: the buffer all-reduced,
    broadcast or reduced, or the full output of an all-gather, or the full input of a
    reduce-scatter; a sendrecv's buffer is what each rank sends to the next of its group
    (:mod:`atpsim.collectives.sendrecv`). *root* is the position in each group of a
    broadcast's source or a reduce's destination (0 for the other collectives)."""

    name: str
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                        "all_to_all", "sendrecv"]
    dim: int
    bytes: float
    root: int = 0


@dataclass(frozen=True)
class Task:
    """One op in program order: *deps* are ids of tasks that must finish before it starts."""

    id: int
    op: ComputeOp | CommOp
    chunk: int
    phase: Literal["fwd", "bwd"]
    deps: tuple[int, ...] = ()

    @property
    def stream(self) -> Stream:
        return "comm" if isinstance(self.op, CommOp) else "compute"


@dataclass(frozen=True)
class StepProgram:
    """Tasks in issue order (a topological order); each stream runs its tasks in this order.
    *flags* are notes the plan wants reported beside the results (e.g. that the attention
    heads do not divide evenly over the mesh); they do not change how the program runs."""

    tasks: tuple[Task, ...]
    flags: tuple[str, ...] = ()

    def compute_ops(self) -> list[ComputeOp]:
        return [t.op for t in self.tasks if isinstance(t.op, ComputeOp)]

    def comm_ops(self) -> list[CommOp]:
        return [t.op for t in self.tasks if isinstance(t.op, CommOp)]
