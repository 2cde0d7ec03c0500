"""Transformer model configurations and the paper's presets M1-M4 (Table 2).

Defaults b = 4, s = 2048, fp16 are the paper's (Section 5, "By default, we set the batch size
to 4 and the sequence length to 2048"). ``layers`` defaults to 1: the paper reports
per-layer FLOPs and TFLOP/s, which do not depend on the layer count.
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.errors import AtpsimError

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-style decoder: hidden size, heads, layers, batch, sequence length and dtype."""

    name: str
    hidden: int
    heads: int
    layers: int = 1
    batch: int = 4
    seq: int = 2048
    dtype: str = "fp16"
    ffn_mult: int = 4

    def __post_init__(self) -> None:
        for field in ("hidden", "heads", "layers", "batch", "seq", "ffn_mult"):
            if getattr(self, field) < 1:
                raise AtpsimError(f"model.{field} must be >= 1, got {getattr(self, field)}")
        if self.hidden % self.heads:
            raise AtpsimError(
                f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})"
            )
        if self.dtype not in DTYPE_BYTES:
            raise AtpsimError(f"model.dtype {self.dtype!r} is not one of {sorted(DTYPE_BYTES)}")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def layer_flops(self) -> float:
        """Forward+backward GEMM FLOPs of one layer: 72·b·s·h² + 12·b·s²·h (Megatron-LM's
        formula without recomputation; reproduces Table 2's 2.625 ... 83.25 x 2^40)."""
        b, s, h = self.batch, self.seq, self.hidden
        return 72.0 * b * s * h * h + 12.0 * b * s * s * h

    def step_flops(self) -> float:
        return self.layers * self.layer_flops()


#: Table 2 of the paper (hidden size, heads); b, s, dtype at the paper's defaults.
MODEL_PRESETS: dict[str, ModelConfig] = {
    "M1": ModelConfig("M1", hidden=2048, heads=16),
    "M2": ModelConfig("M2", hidden=4096, heads=32),
    "M3": ModelConfig("M3", hidden=8192, heads=64),
    "M4": ModelConfig("M4", hidden=12288, heads=96),
}


def model_preset(name: str) -> ModelConfig:
    """The preset called *name* (M1..M4)."""
    from atpsim.errors import did_you_mean

    if name not in MODEL_PRESETS:
        raise AtpsimError(f"unknown model preset {name!r}{did_you_mean(name, MODEL_PRESETS)}")
    return MODEL_PRESETS[name]
