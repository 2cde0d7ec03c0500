"""Duration of one compute op of a step program on a hardware profile.

A ``gemm`` op is timed by the GEMM model (:mod:`atpsim.compute.gemm`) from its shape; a
``memory`` op (LayerNorm, softmax, GeLU, dropout, residual add, bias) is memory-bound:

    t = launch_overhead_s + bytes_moved / (memory_bandwidth_Bps · memory_efficiency[class])

where *memory_efficiency* is the profile's documented achievable fraction of bandwidth, for the
op's class (:func:`memory_op_class`) where the profile gives one
(:meth:`atpsim.compute.hardware.HardwareProfile.memory_efficiency_for`), else its single value.

A model trained in fp8 (Transformer Engine) runs its linears' GEMMs in FP8, each op saying so
(``ComputeOp.dtype``), and every other GEMM in bf16 (:data:`~atpsim.compute.models.
FP8_COMPUTE_DTYPE`): the GEMM model times each at its own dtype's peak.
"""

from __future__ import annotations

from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import FP8_COMPUTE_DTYPE, ModelConfig
from atpsim.errors import AtpsimError, SimulationError
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


def gemm_dtype(op: ComputeOp, dtype: str) -> str:
    """The dtype GEMM *op* of a model trained in *dtype* runs in: the op's own where it names
    one (an FP8 linear), else the model's compute dtype (bf16 for fp8)."""
    if op.dtype is not None:
        return op.dtype
    return FP8_COMPUTE_DTYPE if dtype == "fp8" else dtype


def check_model_dtype(profile: HardwareProfile, model: ModelConfig) -> None:
    """Refuse (key ``model.dtype``) a model dtype *profile* has no peak FLOP/s for, e.g. fp8 on
    an A100 (no FP8 tensor cores), before anything is simulated."""
    peaks = dict(profile.peak_flops)
    if model.dtype not in peaks:
        raise SimulationError(f"{model.dtype} is not a dtype of hardware profile {profile.name!r}: it "
                              f"has no {model.dtype} peak FLOP/s (it knows {', '.join(sorted(peaks))})",
                              key="model.dtype")  # fmt: skip


def compute_time_s(op: ComputeOp, profile: HardwareProfile, dtype: str) -> float:
    """Seconds *op* runs on one GPU of *profile* for a model trained in *dtype*
    (:func:`gemm_dtype`)."""
    if op.kind == "gemm":
        return gemm_time_s(op.m, op.n, op.k, op.batch, gemm_dtype(op, dtype), profile)
    if op.kind == "memory":
        return memory_time_s(op.bytes_moved, profile, memory_op_class(op.name))
    raise AtpsimError(
        f"compute op {op.name!r} has unknown kind {op.kind!r}; expected gemm or memory"
    )
