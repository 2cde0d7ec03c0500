"""Transformer model configurations and the paper's presets M1-M4 (Table 2).

Defaults b = 4, s = 2048, fp16 are the paper's (Section 5, "By default, we set the batch size
to 4 and the sequence length to 2048"). ``layers`` defaults to 1: the paper reports
per-layer FLOPs and TFLOP/s, which do not depend on the layer count.
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.errors import AtpsimError, did_you_mean

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


#: The GPT-3 family (Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1:
#: layers, d_model, heads; context 2048), for whole-job simulations (``atpsim.simulate_job``,
#: ``atpsim plan --global-batch``); one sample per micro-batch. Two rows of the table do not
#: multiply out, and the table's d_head (128) settles both: 13B's d_model is printed as 5140
#: (5120 = 40 x 128 is used) and 1.3B's heads as 24 (16 = 2048 / 128 is used).
#: Their vocabulary is GPT-2's 50,257 tokens (Section 2.1), padded to 51,200 in a job.
GPT3_PRESETS: dict[str, ModelConfig] = {
    name: ModelConfig(name, hidden=hidden, heads=heads, layers=layers, batch=1, seq=2048)
    for name, layers, hidden, heads in (
        ("gpt3-125m", 12, 768, 12),
        ("gpt3-350m", 24, 1024, 16),
        ("gpt3-760m", 24, 1536, 16),
        ("gpt3-1.3b", 24, 2048, 16),
        ("gpt3-2.7b", 32, 2560, 32),
        ("gpt3-6.7b", 32, 4096, 32),
        ("gpt3-13b", 40, 5120, 40),
        ("gpt3-175b", 96, 12288, 96),
    )
}


#: GPT models of Megatron-LM's weak-scaling study (Narayanan et al., "Efficient Large-Scale
#: Language Model Training on GPU Clusters Using Megatron-LM", SC 2021, Table 1: attention
#: heads, hidden size, layers; sequence length 2048, vocabulary 51,200), 1.7B to 1T
#: parameters; one sample per micro-batch.
MEGATRON_PRESETS: dict[str, ModelConfig] = {
    name: ModelConfig(name, hidden=hidden, heads=heads, layers=layers, batch=1, seq=2048)
    for name, heads, hidden, layers in (
        ("megatron-1.7b", 24, 2304, 24),
        ("megatron-3.6b", 32, 3072, 30),
        ("megatron-7.5b", 32, 4096, 36),
        ("megatron-18b", 48, 6144, 40),
        ("megatron-39b", 64, 8192, 48),
        ("megatron-76b", 80, 10240, 60),
        ("megatron-145b", 96, 12288, 80),
        ("megatron-310b", 128, 16384, 96),
        ("megatron-530b", 128, 20480, 105),
        ("megatron-1t", 160, 25600, 128),
    )
}

#: The padded vocabulary of each preset that has one (tokens): GPT-2's 50,257 padded to
#: 51,200 for the GPT-3 family (as Megatron-LM pads it), and Table 1's 51,200 for Megatron-LM's.
PRESET_VOCAB: dict[str, int] = {name: 51200 for name in (*GPT3_PRESETS, *MEGATRON_PRESETS)}


def preset_names() -> list[str]:
    """Every model preset: M1..M4, the GPT-3 family and Megatron-LM's GPT models."""
    return [*MODEL_PRESETS, *GPT3_PRESETS, *MEGATRON_PRESETS]


def model_preset(name: str) -> ModelConfig:
    """The preset called *name*: the paper's M1..M4, a GPT-3 model (``gpt3-1.3b``, ...) or
    a Megatron-LM GPT model (``megatron-1t``, ...)."""
    presets = {**MODEL_PRESETS, **GPT3_PRESETS, **MEGATRON_PRESETS}
    if name not in presets:
        raise AtpsimError(f"unknown model preset {name!r}{did_you_mean(name, presets)}")
    return presets[name]
