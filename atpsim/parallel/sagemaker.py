"""SageMaker-style tensor parallelism: tensor parallelism over data-parallel ranks.

Karakus et al., "Amazon SageMaker Model Parallelism" (2021), Section 5 and Figure 6 (the
seed paper in ../shared/paper/sagemaker-model-parallelism.md): the ``t`` ranks of a TP group
are data-parallel ranks, each with *its own* samples. A distributed linear ``y = W x`` splits
``W`` over its input features, ``W = [W_1 ... W_t]``; each rank slices its samples' inputs the
same way and sends slice ``j`` to rank ``j`` (an all-to-all), rank ``j`` applies ``W_j`` to the
slices of every rank's samples, and a reduce-scatter sums the partial outputs and returns each
sample's output to the rank it came from. Everything else (LayerNorms, the attention core, the
activations) runs data-parallel on the rank's own samples. The backward is the conjugate: the
output gradient is all-gathered, dgrad gives each rank the input-gradient slice of every
sample, an all-to-all sends them home, and wgrad runs on all the group's samples.

Here the four linears of every layer (QKV, attention output, FC1, FC2) are distributed. So a
group of ``t`` ranks training ``model.batch`` samples holds ``model.batch / t`` samples per rank,
runs the same GEMM FLOPs per rank as data parallelism, and stores ``1/t`` of the linears'
weights; the price is an all-to-all and a reduce-scatter of every linear's activations in the
forward, an all-gather and an all-to-all in the backward. The group is dimension 1 of
DeviceMesh(t, 1). A collective's bytes follow nccl-tests: the all-to-all's buffer is the rank's
whole input, the reduce-scatter's and the all-gather's the group's whole output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.atp import layer_dims
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.ops import (
    LN_BWD_PASSES,
    LN_FWD_PASSES,
    Issuer,
    Item,
    LayerDims,
    attention_core_backward,
    attention_core_forward,
    chain_items,
    gemm_op,
    layernorm_items,
    memory_op,
    require_gpt_layer,
)
from atpsim.program import CommOp, StepProgram


@dataclass(frozen=True)
class SageMakerGroup:
    """*t* data-parallel ranks that share SageMaker-style TP: the group is dimension 1 of
    DeviceMesh(t, 1) (consecutive GPUs), and a scenario's or the API's ``model.batch`` is the
    group's samples, split evenly over its ranks."""

    t: int

    def __post_init__(self) -> None:
        if self.t < 1:
            raise SimulationError(f"a SageMaker TP group needs t >= 1 ranks, got {self.t}")

    @property
    def size(self) -> int:
        return self.t

    def mesh(self) -> DeviceMesh:
        """The mesh whose dimension 1 is the group: DeviceMesh(t, 1)."""
        return DeviceMesh(self.t, 1)

    def groups(self, dim: int) -> list[list[int]]:
        """GPU ranks of the groups of mesh dimension *dim* (only dimension 1 carries traffic)."""
        return self.mesh().groups(dim)

    def __str__(self) -> str:
        return f"SageMakerGroup(t={self.t})"


def build_sagemaker_program(model: ModelConfig, t: int, chunks: int = 1,
                            phases: tuple[Literal["fwd", "bwd"], ...] = ("fwd", "bwd")) -> StepProgram:
    """Forward and backward of *model*'s layers with SageMaker-style TP over *t* ranks, the
    group's ``model.batch`` samples split evenly over its ranks and each rank's share into
    *chunks*."""
    require_gpt_layer(model, "sagemaker")
    if t < 1 or model.batch % (t * chunks) or model.hidden % t or model.ffn_size % t:
        raise SimulationError(f"the batch ({model.batch}) must split over {t} ranks x {chunks} "
                              f"chunks and the hidden size ({model.hidden}) over {t} ranks",
                              key="chunks")  # fmt: skip
    local = layer_dims(local_model(model, t), DeviceMesh(1, 1), chunks)
    issuer = Issuer(chunks)
    if "fwd" in phases:
        issuer.issue([i for layer in range(model.layers) for i in _forward(model, t, local, layer)], "fwd")
    if "bwd" in phases:
        issuer.issue([i for layer in reversed(range(model.layers))
                      for i in _backward(model, t, local, layer)], "bwd")  # fmt: skip
    return StepProgram(tasks=tuple(issuer.tasks))


def local_model(model: ModelConfig, t: int) -> ModelConfig:
    """*model* as one rank of a group of *t* sees it: its own ``batch / t`` samples."""
    return replace(model, batch=model.batch // t)


def _collective(name: str, kind: str, nbytes: float, t: int) -> list[Item]:
    """The group's collective on mesh dimension 1, or nothing for a group of one."""
    return [] if t == 1 else [(CommOp(name, kind, 1, float(nbytes)), "chain")]  # type: ignore[arg-type]


def _linear_fwd(name: str, fin: int, fout: int, t: int, d: LayerDims) -> list[Item]:
    """all-to-all of the rank's input, the GEMM on every rank's slices, the reduce-scatter."""
    tokens, b = d.tokens, d.dtype_bytes
    return [
        *_collective(f"{name}_scatter", "all_to_all", tokens * fin * b, t),
        *chain_items(gemm_op(name, tokens * t, fout, fin // t, d)),
        *_collective(f"{name}_sum", "reduce_scatter", tokens * t * fout * b, t),
    ]


def _linear_bwd(name: str, fin: int, fout: int, t: int, d: LayerDims) -> list[Item]:
    """all-gather of the output gradient, dgrad to every sample's input slice, the
    all-to-all that sends them home, wgrad on all the group's samples."""
    tokens, b = d.tokens, d.dtype_bytes
    return [
        *_collective(f"{name}_grad_gather", "all_gather", tokens * t * fout * b, t),
        (gemm_op(f"{name}_dgrad", tokens * t, fin // t, fout, d), "dgrad"),
        *_collective(f"{name}_grad_home", "all_to_all", tokens * fin * b, t),
        (gemm_op(f"{name}_wgrad", fin // t, fout, tokens * t, d), "wgrad"),
    ]


def _forward(model: ModelConfig, t: int, d: LayerDims, layer: int) -> list[Item]:
    p, b, h, f = f"l{layer}.", d.dtype_bytes, model.hidden, d.ffn
    return [
        *layernorm_items(f"{p}ln1", d, LN_FWD_PASSES),
        *_linear_fwd(f"{p}qkv", h, 3 * h, t, d),
        *attention_core_forward(p, d),
        *_linear_fwd(f"{p}proj", h, h, t, d),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add", d.tokens * h, 3 * b + 1)),
        *layernorm_items(f"{p}ln2", d, LN_FWD_PASSES),
        *_linear_fwd(f"{p}fc1", h, f, t, d),
        *chain_items(memory_op(f"{p}fc1_bias_gelu", d.tokens * f, 2 * b)),
        *_linear_fwd(f"{p}fc2", f, h, t, d),
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add", d.tokens * h, 3 * b + 1)),
    ]


def _backward(model: ModelConfig, t: int, d: LayerDims, layer: int) -> list[Item]:
    p, b, h, f = f"l{layer}.", d.dtype_bytes, model.hidden, d.ffn
    return [
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add_bwd", d.tokens * h, 2 * b + 1)),
        *_linear_bwd(f"{p}fc2", f, h, t, d),
        *chain_items(memory_op(f"{p}fc1_bias_gelu_bwd", d.tokens * f, 3 * b)),
        *_linear_bwd(f"{p}fc1", h, f, t, d),
        *layernorm_items(f"{p}ln2_bwd", d, LN_BWD_PASSES),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add_bwd", d.tokens * h, 2 * b + 1)),
        *_linear_bwd(f"{p}proj", h, h, t, d),
        *attention_core_backward(p, d),
        *_linear_bwd(f"{p}qkv", h, 3 * h, t, d),
        *layernorm_items(f"{p}ln1_bwd", d, LN_BWD_PASSES),
    ]
