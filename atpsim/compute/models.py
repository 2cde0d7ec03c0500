"""Transformer model configurations: the paper's presets M1-M4 (Table 2), the GPT-3 and
Megatron-LM GPT families, and Llama 3.1.

Defaults b = 4, s = 2048, fp16 are the paper's (Section 5, "By default, we set the batch size
to 4 and the sequence length to 2048"). ``layers`` defaults to 1: the paper reports
per-layer FLOPs and TFLOP/s, which do not depend on the layer count.

A layer is GPT's (multi-head attention, a GeLU MLP of ``ffn_mult·hidden``, the LM head tied
to the embedding) unless told otherwise; Llama-style layers set ``kv_heads`` (grouped-query
attention: the K and V projections are ``h x kv_heads·head_dim``), ``ffn_hidden`` and
``ffn: swiglu`` (three ``h x ffn_hidden`` matrices, the gate and up projections fused into
one ``h -> 2·ffn_hidden`` GEMM as Megatron-LM fuses them) and ``tie_embeddings: false`` (a
separate ``h x vocab`` output matrix). ``dtype: fp8`` is Transformer Engine's FP8 training:
the linear layers' GEMMs run in FP8, everything else (attention core, element-wise ops,
communication, the LM head) in bf16, and the weights are kept in bf16 with an FP8 copy.

A mixture of experts (``experts`` > 0; GShard, Lepikhin et al. 2020; Switch Transformer, Fedus
et al. 2021) replaces the MLP of every ``moe_every``-th layer (layers 0, k, 2k, ... of each model
chunk, Megatron-Core's ``moe_layer_freq``) by a router (``h x experts``) and ``experts`` MLPs of
``expert_ffn_hidden`` (default ``ffn_hidden``), each token going to its ``top_k`` best (default
2). ``capacity_factor`` is GShard's: an expert takes at most ``capacity_factor`` times its fair
share of the tokens (``top_k·tokens/experts``), and the busiest expert is that full, so it sets
the layer's time (:mod:`atpsim.parallel.moe`).
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.errors import AtpsimError, did_you_mean

#: Bytes of one element of each dtype (fp8: one byte, the operands of an FP8 GEMM).
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}
#: The MLP's activation: GPT's GeLU (two matrices) or SwiGLU (three, gate and up fused).
FFN_KINDS = ("gelu", "swiglu")
#: The dtype everything but an FP8 linear's GEMMs runs in when the model trains in fp8
#: (Transformer Engine keeps the tensors between GEMMs in bf16).
FP8_COMPUTE_DTYPE = "bf16"


#: The fields of a layer's shape beyond GPT's, at their GPT values (:meth:`ModelConfig.as_dict`).
LAYER_SHAPE_DEFAULTS: dict[str, object] = {
    "kv_heads": None, "ffn_hidden": None, "ffn": "gelu", "tie_embeddings": True, "vocab": 0,
    "experts": 0, "top_k": None, "moe_every": 1, "expert_ffn_hidden": None, "capacity_factor": 1.0,
}  # fmt: skip
#: Experts a token goes to where ``top_k`` is not given (Mixtral's and GShard's top-2).
DEFAULT_TOP_K = 2
_UNSET = object()


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer: hidden size, heads, layers, batch, sequence length, dtype
    and the layer's shape (module docstring). ``kv_heads`` None = ``heads`` (multi-head
    attention); ``ffn_hidden`` None = ``ffn_mult·hidden``; ``vocab`` 0 = none given (the job's
    own setting, or no embedding and LM head)."""

    name: str
    hidden: int
    heads: int
    layers: int = 1
    batch: int = 4
    seq: int = 2048
    dtype: str = "fp16"
    ffn_mult: int = 4
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    ffn: str = "gelu"
    tie_embeddings: bool = True
    vocab: int = 0
    experts: int = 0
    top_k: int | None = None
    moe_every: int = 1
    expert_ffn_hidden: int | None = None
    capacity_factor: float = 1.0

    def __post_init__(self) -> None:
        for field in ("hidden", "heads", "layers", "batch", "seq", "ffn_mult"):
            if getattr(self, field) < 1:
                raise AtpsimError(f"model.{field} must be >= 1, got {getattr(self, field)}")
        for field in ("kv_heads", "ffn_hidden"):
            if getattr(self, field) is not None and getattr(self, field) < 1:
                raise AtpsimError(f"model.{field} must be >= 1, got {getattr(self, field)}")
        if self.hidden % self.heads:
            raise AtpsimError(
                f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})"
            )
        if self.heads % self.n_kv_heads:
            raise AtpsimError(f"model.kv_heads ({self.n_kv_heads}) must divide model.heads "
                              f"({self.heads}): each KV head serves a group of query heads")
        if self.dtype not in DTYPE_BYTES:
            raise AtpsimError(f"model.dtype {self.dtype!r} is not one of {sorted(DTYPE_BYTES)}")
        if self.ffn not in FFN_KINDS:
            raise AtpsimError(f"model.ffn {self.ffn!r} is not one of {list(FFN_KINDS)}"
                              f"{did_you_mean(str(self.ffn), FFN_KINDS)}")
        if self.vocab < 0:
            raise AtpsimError(f"model.vocab must be >= 0, got {self.vocab}")
        self._check_experts()

    def _check_experts(self) -> None:
        """The mixture-of-experts keys, each refused by its key (module docstring)."""
        if self.experts < 0:
            raise AtpsimError(f"model.experts must be >= 0 (0: a dense MLP), got {self.experts}")
        for field in ("top_k", "expert_ffn_hidden"):
            if getattr(self, field) is not None and getattr(self, field) < 1:
                raise AtpsimError(f"model.{field} must be >= 1, got {getattr(self, field)}")
        if self.moe_every < 1:
            raise AtpsimError(f"model.moe_every must be >= 1, got {self.moe_every}")
        if not 1.0 <= self.capacity_factor < float("inf"):
            raise AtpsimError(f"model.capacity_factor must be a finite number >= 1 (the busiest "
                              f"expert's tokens over its fair share), got {self.capacity_factor}")
        if self.experts and self.router_top_k > self.experts:
            raise AtpsimError(f"model.top_k ({self.router_top_k}) must be at most model.experts "
                              f"({self.experts})")  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        """The fields as a mapping, the layer-shape fields (:data:`LAYER_SHAPE_DEFAULTS`) only
        where they differ from GPT's: the canonical form a sweep point's key hashes, so a GPT
        model keys as it did before those fields existed."""
        return {key: value for key, value in self.__dict__.items()
                if LAYER_SHAPE_DEFAULTS.get(key, _UNSET) != value}  # fmt: skip

    @property
    def dtype_bytes(self) -> int:
        """Bytes of an activation, gradient or message element: the dtype's, bf16's for fp8
        (only the FP8 GEMMs' operands are one byte, :func:`atpsim.compute.gemm.gemm_bytes`)."""
        return DTYPE_BYTES[self.compute_dtype]

    @property
    def compute_dtype(self) -> str:
        """The dtype of every op but an FP8 linear's GEMM: *dtype*, bf16 for fp8."""
        return FP8_COMPUTE_DTYPE if self.dtype == "fp8" else self.dtype

    @property
    def linear_dtype(self) -> str | None:
        """The dtype the linear layers' GEMMs run in where it is not :attr:`compute_dtype`:
        ``fp8`` for FP8 training (Transformer Engine), else None."""
        return "fp8" if self.dtype == "fp8" else None

    @property
    def weight_bytes_per_param(self) -> int:
        """Bytes of weights one parameter keeps besides the optimizer's: the low-precision
        copy (``dtype_bytes``) and, in fp8, the FP8 copy the GEMMs read (1 byte; its
        transpose for the backward is transient and not counted)."""
        return self.dtype_bytes + (DTYPE_BYTES["fp8"] if self.dtype == "fp8" else 0)

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads: ``kv_heads``, else ``heads`` (multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of the K (and of the V) projection: ``kv_heads·head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def qkv_out(self) -> int:
        """Output width of the fused QKV projection: ``h + 2·kv_heads·head_dim`` (3h without GQA)."""
        return self.hidden + 2 * self.kv_hidden

    @property
    def ffn_size(self) -> int:
        """The MLP's hidden width: ``ffn_hidden``, else ``ffn_mult·hidden``."""
        return self.ffn_mult * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def gated(self) -> bool:
        """Whether the MLP is gated (SwiGLU: the first GEMM is ``h -> 2·ffn_size``)."""
        return self.ffn == "swiglu"

    @property
    def fc1_out(self) -> int:
        """Output width of the MLP's first GEMM: ``2·ffn_size`` gated, else ``ffn_size``."""
        return 2 * self.ffn_size if self.gated else self.ffn_size

    def layer_weights(self) -> int:
        """Weights of one dense layer's linears (no biases): ``h·(h + 2·kv) + h² + h·fc1_out +
        ffn·h``, ``12h²`` for GPT's layer."""
        h = self.hidden
        return h * self.qkv_out + h * h + h * self.fc1_out + self.ffn_size * h

    @property
    def is_moe(self) -> bool:
        """Whether some layers are a mixture of experts (``experts`` > 0)."""
        return self.experts > 0

    @property
    def router_top_k(self) -> int:
        """Experts each token goes to: ``top_k``, else :data:`DEFAULT_TOP_K`."""
        return DEFAULT_TOP_K if self.top_k is None else self.top_k

    @property
    def expert_ffn_size(self) -> int:
        """One expert's hidden width: ``expert_ffn_hidden``, else :attr:`ffn_size`."""
        return self.ffn_size if self.expert_ffn_hidden is None else self.expert_ffn_hidden

    @property
    def expert_fc1_out(self) -> int:
        """Output width of an expert's first GEMM: ``2·expert_ffn`` gated, else ``expert_ffn``."""
        return 2 * self.expert_ffn_size if self.gated else self.expert_ffn_size

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer *layer* (0-based, within a model chunk) is a mixture of experts:
        layers 0, k, 2k, ... for ``moe_every`` k (Megatron-Core's ``moe_layer_freq``)."""
        return self.is_moe and layer % self.moe_every == 0

    @property
    def moe_layers(self) -> int:
        """How many of the ``layers`` are mixtures of experts."""
        return sum(self.is_moe_layer(layer) for layer in range(self.layers))

    def expert_weights(self) -> int:
        """Weights of one expert's two linears (no biases): ``h·expert_fc1_out + expert_ffn·h``."""
        return self.hidden * self.expert_fc1_out + self.expert_ffn_size * self.hidden

    def moe_layer_weights(self, active: bool = False) -> int:
        """Weights of one MoE layer's linears (no biases): the attention's, the router's
        ``h·experts`` and every expert's (*active*: the ``top_k`` experts a token passes
        through, and no router, which Megatron-LM's FLOP count leaves out)."""
        h = self.hidden
        attention = h * self.qkv_out + h * h
        if active:
            return attention + self.router_top_k * self.expert_weights()
        return attention + h * self.experts + self.experts * self.expert_weights()

    def stack_weights(self, active: bool = False) -> int:
        """Weights of all ``layers`` (no biases, norms or embeddings): dense layers'
        :meth:`layer_weights` and MoE layers' :meth:`moe_layer_weights` (*active*: top-k)."""
        moe = self.moe_layers
        return (self.layers - moe) * self.layer_weights() + moe * self.moe_layer_weights(active)

    def param_count(self, vocab: int, active: bool = False) -> int:
        """The model's parameters with a vocabulary of *vocab* tokens: :meth:`stack_weights`,
        the embedding ``V·h`` and an untied LM head's ``V·h``; biases and norms, under 0.01% of
        a large model, left out (a released checkpoint's count: Mixtral 8x7B 46.7B, 12.9B
        active). *active*: what one token passes through (``top_k`` experts, no router)."""
        heads = 1 if self.tie_embeddings else 2
        return self.stack_weights(active) + heads * vocab * self.hidden

    def layer_flops(self) -> float:
        """Forward+backward GEMM FLOPs of one layer without recomputation: 3 passes x 2 FLOPs
        per multiply-add x the tokens ``b·s`` through the linears' weights, plus the attention
        core's ``Q K^T`` and ``P V`` (``2·b·s²·h`` each forward):
        ``6·b·s·W + 12·b·s²·h``, W = :meth:`layer_weights`. For GPT's layer (W = 12h²) it is
        ``72·b·s·h² + 12·b·s²·h``, Narayanan et al. (SC 2021), Appendix ("Floating-point
        operations", without recomputation), which reproduces Table 2's 2.625 ... 83.25 x 2^40.
        Grouped-query attention shrinks the K and V projections from ``2h²`` to ``2h·kv``
        (``kv = kv_heads·head_dim``) and leaves the attention core alone (each query head
        still attends over the sequence); SwiGLU's MLP is ``3·h·ffn`` instead of ``2·h·ffn``.
        This is Megatron-LM's ``num_floating_point_operations`` (megatron/training/training.py:
        ``12·b·s·h²·(1 + kv/h + s/h + (ffn/h)·3/2)`` per layer for SwiGLU)."""
        b, s, h = self.batch, self.seq, self.hidden
        return float(6 * b * s * self.layer_weights() + 12 * b * s * s * h)

    def moe_layer_flops(self) -> float:
        """Forward+backward GEMM FLOPs of one MoE layer: :meth:`layer_flops` with the active
        weights (:meth:`moe_layer_weights`: ``top_k`` experts' MLPs, the router left out), as
        Megatron-LM counts model FLOPs (``moe_ffn_hidden_size · num_experts_routed_to`` in
        ``num_floating_point_operations``). Capacity padding is not model FLOPs."""
        b, s, h = self.batch, self.seq, self.hidden
        return float(6 * b * s * self.moe_layer_weights(active=True) + 12 * b * s * s * h)

    def step_flops(self) -> float:
        """Model FLOPs of the ``layers`` (forward + backward): dense and MoE layers each their
        own count."""
        if not self.is_moe:
            return self.layers * self.layer_flops()
        moe = self.moe_layers
        return (self.layers - moe) * self.layer_flops() + moe * self.moe_layer_flops()


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

#: Llama 3.1 (Meta, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3: layers, model
#: dimension, FFN dimension, attention heads, key/value heads 8, vocabulary 128,000 -- the
#: released tokenizer's 128,256 tokens, as each model's published ``config.json`` gives
#: ``vocab_size``, ``intermediate_size``, ``num_key_value_heads`` and
#: ``tie_word_embeddings: false``); SwiGLU, untied embeddings, bf16, sequence 8192 (Section
#: 3.4.1: pre-training runs at 8K tokens before the long-context stage); one sample per
#: micro-batch. Not modelled: RMSNorm (timed as LayerNorm), the absent linear biases (counted
#: as Megatron-LM's default ``add_bias_linear``: under 0.01% of the parameters), RoPE.
LLAMA_PRESETS: dict[str, ModelConfig] = {
    name: ModelConfig(name, hidden=hidden, heads=heads, layers=layers, batch=1, seq=8192,
                      dtype="bf16", kv_heads=8, ffn_hidden=ffn, ffn="swiglu",
                      tie_embeddings=False)
    for name, layers, hidden, heads, ffn in (
        ("llama3.1-8b", 32, 4096, 32, 14336),
        ("llama3.1-70b", 80, 8192, 64, 28672),
        ("llama3.1-405b", 126, 16384, 128, 53248),
    )
}

#: Mixtral 8x7B (Jiang et al., "Mixtral of Experts", arXiv:2401.04088, Table 1: dim 4096,
#: n_layers 32, head_dim 128, hidden_dim 14336, n_heads 32, n_kv_heads 8, vocab_size 32000,
#: num_experts 8, top_k_experts 2; its released ``config.json``: ``num_local_experts`` 8,
#: ``num_experts_per_tok`` 2, ``intermediate_size`` 14336, ``tie_word_embeddings: false``,
#: bfloat16): every layer's MLP is 8 SwiGLU experts of 14,336, top-2; 47B parameters, 13B
#: active (Section 2.1; 46.7B and 12.9B in Mistral AI's announcement). Sequence 4096: the context length is 32,768, but no
#: training sequence is published; 4096 is NeMo's ``MixtralConfig8x7B.seq_length``. One
#: sample per micro-batch; capacity factor 1.0 (every expert at its fair share).
MOE_PRESETS: dict[str, ModelConfig] = {
    "mixtral-8x7b": ModelConfig("mixtral-8x7b", hidden=4096, heads=32, layers=32, batch=1,
                                seq=4096, dtype="bf16", kv_heads=8, ffn_hidden=14336,
                                ffn="swiglu", tie_embeddings=False, experts=8, top_k=2,
                                expert_ffn_hidden=14336),
}

#: BLOOM-176B (BigScience, Scao et al., "BLOOM: A 176B-Parameter Open-Access Multilingual
#: Language Model", arXiv:2211.05100, Table 3: 70 layers, hidden 14336, 112 heads, sequence
#: 2048, bfloat16; tied embeddings; its released ``config.json``: ``n_layer`` 70,
#: ``hidden_size`` 14336, ``n_head`` 112, ``vocab_size`` 250880): a GPT-style layer (4h GELU
#: MLP), 176.2B parameters with the embedding. Trained on 384 A100 80GB GPUs with TP 4, PP 12,
#: DP 8 ("The Technology Behind BLOOM Training", Hugging Face blog, 2022): 70 layers on 12
#: stages, an uneven pipeline (``partition``). Not modelled: ALiBi (no position embedding is
#: timed either), the embedding LayerNorm.
BLOOM_PRESETS: dict[str, ModelConfig] = {
    "bloom-176b": ModelConfig("bloom-176b", hidden=14336, heads=112, layers=70, batch=1, seq=2048,
                              dtype="bf16"),
}

#: The padded vocabulary of each preset that has one (tokens), the one source of a preset's
#: vocabulary: GPT-2's 50,257 padded to 51,200 for the GPT-3 family (as Megatron-LM pads it),
#: Table 1's 51,200 for Megatron-LM's; Llama 3.1's 128,256 as released (a multiple of 128, so
#: it splits over TP up to 128 ranks; Megatron-LM would pad it to a multiple of 128·TP,
#: 129,024 at TP 8, which is not modelled: the job takes the vocabulary as given); Mixtral's
#: 32,000 (Table 1); BLOOM's 250,680-token tokenizer padded to 250,880 (its ``config.json``).
PRESET_VOCAB: dict[str, int] = {
    **{name: 51200 for name in (*GPT3_PRESETS, *MEGATRON_PRESETS)},
    **{name: 128256 for name in LLAMA_PRESETS},
    "mixtral-8x7b": 32000,
    "bloom-176b": 250880,
}

_PRESETS: dict[str, ModelConfig] = {**MODEL_PRESETS, **GPT3_PRESETS, **MEGATRON_PRESETS,
                                    **LLAMA_PRESETS, **MOE_PRESETS, **BLOOM_PRESETS}  # fmt: skip


def preset_names() -> list[str]:
    """Every model preset: M1..M4, the GPT-3 family, Megatron-LM's GPT models, Llama 3.1,
    Mixtral 8x7B and BLOOM-176B."""
    return list(_PRESETS)


def model_preset(name: str) -> ModelConfig:
    """The preset called *name*: the paper's M1..M4, a GPT-3 model (``gpt3-1.3b``, ...),
    a Megatron-LM GPT model (``megatron-1t``, ...), Llama 3.1 (``llama3.1-70b``, ...),
    Mixtral (``mixtral-8x7b``) or BLOOM (``bloom-176b``)."""
    if name not in _PRESETS:
        raise AtpsimError(f"unknown model preset {name!r}{did_you_mean(name, _PRESETS)}")
    return _PRESETS[name]
