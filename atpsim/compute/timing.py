"""Duration of one compute op of a step program on a hardware profile.

A ``gemm`` op is timed by the GEMM model (:mod:`atpsim.compute.gemm`) from its shape; a
``memory`` op (LayerNorm, softmax, GeLU, dropout, residual add, bias) is memory-bound:

    t = launch_overhead_s + bytes_moved / (memory_bandwidth_Bps · memory_efficiency[class])

where *memory_efficiency* is the profile's documented achievable fraction of bandwidth, for the
op's class (:func:`memory_op_class`) where the profile gives one
(:meth:`atpsim.compute.hardware.HardwareProfile.memory_efficiency_for`), else its single value.
"""

from __future__ import annotations

from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import HardwareProfile
from atpsim.errors import AtpsimError
from atpsim.program import ComputeOp

#: Memory-bound op classes by a word of the op's name (first match wins; the layer program's
#: names are those of :mod:`atpsim.parallel.atp`, e.g. ``l0.fc2_bias_dropout_add_bwd``).
_CLASS_WORDS = (
    ("adam", "optimizer"),
    ("softmax", "softmax"),
    ("gelu", "gelu"),
    ("dropout_add", "bias_dropout_add"),
    ("dropout", "dropout"),
)
#: The classes :func:`memory_op_class` returns (each also with ``_bwd``).
MEMORY_OP_CLASSES = (
    "layernorm", "softmax", "gelu", "dropout", "bias_dropout_add", "optimizer", "elementwise",
)  # fmt: skip


def memory_op_class(name: str) -> str:
    """The class of the memory-bound op called *name*: ``layernorm`` for ``ln1``, ``ln2``
    and their parts, else the first of :data:`_CLASS_WORDS` in the name, else
    ``elementwise``; ``_bwd`` appended when the name is of a backward op
    (``l0.ln1_bwd_stats`` -> ``layernorm_bwd``, ``l0.fc1_bias_gelu`` -> ``gelu``)."""
    base = name.rsplit(".", 1)[-1]
    op_class = next((c for word, c in _CLASS_WORDS if word in base), "elementwise")
    if base.startswith("ln"):
        op_class = "layernorm"
    return f"{op_class}_bwd" if "_bwd" in base else op_class


def memory_time_s(
    bytes_moved: float, profile: HardwareProfile, op_class: str | None = None
) -> float:
    """Seconds for a memory-bound kernel of *op_class* that reads and writes *bytes_moved*
    bytes in all (no class: the profile's single memory efficiency)."""
    if bytes_moved <= 0:
        return 0.0
    efficiency = profile.memory_efficiency_for(op_class)
    return profile.launch_overhead_s + bytes_moved / (profile.memory_bandwidth_Bps * efficiency)


def compute_time_s(op: ComputeOp, profile: HardwareProfile, dtype: str) -> float:
    """Seconds *op* runs on one GPU of *profile* with tensors of *dtype*."""
    if op.kind == "gemm":
        return gemm_time_s(op.m, op.n, op.k, op.batch, dtype, profile)
    if op.kind == "memory":
        return memory_time_s(op.bytes_moved, profile, memory_op_class(op.name))
    raise AtpsimError(
        f"compute op {op.name!r} has unknown kind {op.kind!r}; expected gemm or memory"
    )
