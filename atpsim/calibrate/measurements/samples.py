"""The measured samples, one type per kind: what the fit and the comparison read.

Fit points: collectives (:class:`CollectiveSample`, fitted by :mod:`atpsim.calibrate.fit.link`),
GEMMs (:class:`GemmSample`, :mod:`atpsim.calibrate.fit.profile`) and memory-bound ops
(:class:`MemoryOpSample`, :mod:`atpsim.calibrate.fit.memory`). Check points: whole layers
(:class:`LayerPoint`, predicted by :mod:`atpsim.calibrate.compare`). Seconds and bytes
throughout; each time is one statistic of its repetitions (:mod:`.settings`).
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.compute.gemm import gemm_flops
from atpsim.compute.timing import memory_op_class


@dataclass(frozen=True)
class CollectiveSample:
    """One measured collective: *op* on *n_groups* groups of *group_size* ranks at once, each
    rank's buffer *nbytes* (nccl-tests convention), taking *time_s*. *label* says where it came
    from (file and row, or mesh dimension)."""

    op: str
    group_size: int
    n_groups: int
    nbytes: float
    time_s: float
    label: str = ""


@dataclass(frozen=True)
class GemmSample:
    """A measured GEMM ``[m, k] x [k, n]``, *batch* of them back to back in one call, taking
    *time_s* per call (launch or dispatch included)."""

    m: int
    n: int
    k: int
    dtype: str
    time_s: float
    batch: int = 1
    label: str = ""

    @property
    def flops(self) -> float:
        return gemm_flops(self.m, self.n, self.k, self.batch)


@dataclass(frozen=True)
class MemoryOpSample:
    """A measured non-GEMM op moving *bytes_moved* bytes (atpsim's count) in *time_s*."""

    op: str
    bytes_moved: float
    time_s: float
    label: str = ""

    @property
    def op_class(self) -> str:
        return memory_op_class(self.op)


@dataclass(frozen=True)
class LayerPoint:
    """A measured ATP layer: forward + backward of one layer of (hidden, heads) on
    DeviceMesh(d1, d2), *batch* x *seq* tokens split into *chunks*, taking *time_s*."""

    d1: int
    d2: int
    chunks: int
    hidden: int
    heads: int
    batch: int
    seq: int
    dtype: str
    time_s: float
    label: str = ""
    ffn_mult: int = 4
    run_delay_s: float | None = None
