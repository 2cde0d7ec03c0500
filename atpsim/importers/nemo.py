"""A NeMo (or Megatron-Bridge) recipe YAML as a job scenario.

The input is a NeMo 1.x training recipe (the ``trainer:`` and ``model:`` sections of
``examples/nlp/language_modeling/conf/megatron_gpt_config.yaml`` and the NeMo-Framework-
Launcher's ``conf/training/*/*.yaml``), read with that base config's defaults where a key is
left out and Megatron-LM's rules where NeMo derives one (NeMo's GPT model is Megatron-Core's):

==============================================  ==============================================
key (NeMo's default)                            scenario key
==============================================  ==============================================
model.num_layers, .hidden_size,                 model.layers, .hidden, .heads, .seq (required:
.num_attention_heads, .encoder_seq_length       the base config's 12 x 768 toy is no default
                                                for a recipe's model)
model.ffn_hidden_size (4 x hidden)              model.ffn_hidden
model.num_query_groups (null: multi-head)       model.kv_heads
model.activation (gelu; swiglu, fast-swiglu,    model.ffn: swiglu for a gated MLP (geglu and
geglu, reglu: gated)                            reglu run the same GEMMs as SwiGLU)
model.share_embeddings_and_output_weights       model.tie_embeddings
(true)
trainer.precision (bf16), model.fp8 (false)     model.dtype
model.tokenizer.type (GPT2BPETokenizer),        model.vocab: the tokenizer's tokens padded to a
model.make_vocab_size_divisible_by (128)        multiple of 128 x TP
model.num_moe_experts, .moe_router_topk (2)     model.experts, .top_k
trainer.num_nodes (1) x trainer.devices (1)     parallelism.devices
model.tensor_model_parallel_size (1),           parallelism.tp: [[t, 1]], pp, virtual_stages
.pipeline_model_parallel_size (1),              (interleaved schedule), cp, ep
.virtual_pipeline_model_parallel_size (null),
.context_parallel_size (1),
.expert_model_parallel_size (1)
model.micro_batch_size (4), .global_batch_size  parallelism.micro_batch, global_batch
(8)
model.sequence_parallel (false)                 parallelism.sequence_parallel
model.activations_checkpoint_granularity        parallelism.recompute
(null: none)
model.optim.name (fused_adam; distributed_      parallelism.zero (1 for the distributed
fused_adam, mcore_distributed_optim)            optimizers, else 0)
==============================================  ==============================================

Megatron-Bridge's names for the same settings are read too: ``model.seq_length``,
``model.gated_linear_unit``, ``model.recompute_granularity``, ``model.vocab_size``,
``train.micro_batch_size``, ``train.global_batch_size``,
``optimizer.use_distributed_optimizer``. An OmegaConf interpolation (``${.encoder_seq_length}``,
``${model.x}``) is followed where it names another key of the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atpsim.errors import AtpsimError, did_you_mean, param, read_text
from atpsim.importers.common import (
    KNOWN_TOKENIZERS,
    ImportOptions,
    JobDraft,
    finish,
    key_lines,
    option_origin,
    padded_vocab,
    scenario_name,
    whole,
)
from atpsim.importers.trace import ImportedJob, Origin, Traced, default, traced
from atpsim.yamlfile import load_yaml

KIND = "nemo"
FRAMEWORK = "NeMo"
OPTIONS = frozenset({"topology", "gpus", "vocab", "name", "out_dir"})
BASE = "NeMo's megatron_gpt_config.yaml"

_INTERPOLATION = re.compile(r"^\$\{([^}:]+)\}$")
#: Activations whose MLP is gated (three matrices, as SwiGLU's).
GATED = ("swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu")
UNGATED = ("gelu", "squared-relu", "relu")
#: Optimizers that shard their state over data parallelism (ZeRO-1).
DISTRIBUTED_OPTIMIZERS = ("distributed_fused_adam", "mcore_distributed_optim")

#: Sections (or keys) read as a whole: no bearing on an iteration's time, and why.
IGNORED_SECTIONS: dict[str, str] = {
    "name": "the run's name", "restore_from_path": "a checkpoint to start from",
    "run": "the launcher's job settings", "exp_manager": "logging and checkpoints",
    "hydra": "Hydra's settings", "defaults": "Hydra's defaults list",
    "model.data": "data", "model.nsys_profile": "profiling",
    "model.optim": "optimizer hyperparameters", "model.tokenizer": "tokenizer files",
    "checkpoint": "checkpoints", "logger": "logging", "dataset": "data",
    "scheduler": "learning-rate schedule", "rng": "random seeds", "profiling": "profiling",
}  # fmt: skip
#: Keys understood, with no bearing on an iteration's time.
IGNORED_KEYS: dict[str, str] = {
    **dict.fromkeys((
        "trainer.accelerator", "trainer.logger", "trainer.enable_checkpointing",
        "trainer.use_distributed_sampler", "trainer.replace_sampler_ddp", "trainer.max_epochs",
        "trainer.max_steps", "trainer.max_time", "trainer.log_every_n_steps",
        "trainer.val_check_interval", "trainer.limit_val_batches", "trainer.limit_test_batches",
        "trainer.accumulate_grad_batches", "trainer.gradient_clip_val", "trainer.benchmark",
        "trainer.enable_model_summary", "train.train_iters", "train.eval_iters",
        "train.eval_interval", "model.resume_from_checkpoint", "model.seed",
        "model.use_cpu_initialization", "model.onnx_safe", "model.apex_transformer_log_level",
        "model.gc_interval", "model.rampup_batch_size", "model.mcore_gpt", "model.pre_process",
        "model.post_process", "model.deterministic_mode", "model.sync_batch_comm",
    ), "the run's length, logging or checkpoints"),
    **dict.fromkeys((
        "model.init_method_std", "model.use_scaled_init_method", "model.hidden_dropout",
        "model.attention_dropout", "model.ffn_dropout", "model.layernorm_epsilon",
        "model.do_layer_norm_weight_decay", "model.apply_query_key_layer_scaling",
        "model.normalize_attention_scores", "model.rotary_percentage", "model.rotary_base",
        "model.native_amp_init_scale", "model.native_amp_growth_interval", "model.hysteresis",
        "model.fp32_residual_connection", "model.fp16_lm_cross_entropy", "model.megatron_amp_O2",
        "model.grad_allreduce_chunk_size_mb", "model.gradient_as_bucket_view",
        "model.fp8_e4m3", "model.fp8_hybrid", "model.fp8_margin", "model.fp8_interval",
        "model.fp8_amax_history_len", "model.fp8_amax_compute_algo", "model.reduce_amax",
        "model.openai_gelu", "model.headscale", "model.transformer_block_type",
        "model.attention_type", "model.max_position_embeddings", "model.transformer_engine",
        "model.batch_p2p_comm", "model.wgrad_deferral_limit", "model.use_emha",
        "model.ub_tp_comm_overlap_cfg", "model.num_micro_batches_with_partial_activation_checkpoints",
        "model.activations_checkpoint_layers_per_pipeline",
    ), "numerics, initialization or a setting with no effect here"),
}  # fmt: skip
#: Keys understood that atpsim does not simulate: why, and the values that agree with how
#: atpsim simulates the run (those are not warned about).
NOT_MODELLED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "model.use_flash_attention": ("attention is timed unfused (its s x s scores written out)",
                                  lambda v: v is False),
    "model.normalization": ("RMSNorm is timed as LayerNorm", lambda v: v == "layernorm"),
    "model.position_embedding_type": ("rotary position embeddings are not timed",
                                      lambda v: v == "learned_absolute"),
    "model.apply_rope_fusion": ("rotary position embeddings are not timed", lambda v: True),
    "model.bias": ("linear biases are counted as Megatron-LM's default", lambda v: v is True),
    "model.ub_tp_comm_overlap": ("TP communication overlapped with GEMMs (userbuffers) is not "
                                 "simulated: TP communication is exposed", lambda v: not v),
    "model.overlap_p2p_comm": ("pipeline sends are timed as atpsim's schedule issues them",
                               lambda v: not v),
    "model.defer_embedding_wgrad_compute": ("the LM head's weight gradient is computed with each "
                                            "backward", lambda v: not v),
    "model.kv_channels": ("a head's width is hidden / heads", lambda v: v is None),
    "model.activations_checkpoint_method": ("'block' recomputes only some layers; atpsim "
                                            "recomputes every layer at the granularity given",
                                            lambda v: v in (None, "uniform")),
    "model.activations_checkpoint_num_layers": ("atpsim recomputes every layer at the "
                                                "granularity given", lambda v: v in (None, 1)),
    "model.cpu_offloading": ("CPU offloading of layers is not modelled", lambda v: not v),
    "model.moe_grouped_gemm": ("expert GEMMs are timed one expert at a time", lambda v: not v),
    "model.moe_token_dispatcher_type": ("the dispatch is timed as atpsim's all-to-all",
                                        lambda v: True),
    **{f"model.{key}": ("kernel fusion turned off is not modelled op by op", bool)
       for key in ("bias_activation_fusion", "bias_dropout_add_fusion", "masked_softmax_fusion",
                   "gradient_accumulation_fusion", "cross_entropy_loss_fusion",
                   "grad_div_ar_fusion", "persist_layer_norm", "get_attention_mask_from_fusion")},
}  # fmt: skip
#: Keys of ``model.optim`` that bear on time (the rest of the section is ignored).
OPTIM_NOT_MODELLED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "model.optim.overlap_grad_sync": ("atpsim overlaps the gradient reduction with the "
                                      "backward pass", lambda v: v is True),
    "model.optim.overlap_param_sync": ("the parameter all-gather runs after the optimizer step, "
                                       "not overlapped with the next forward", lambda v: not v),
}  # fmt: skip


class _Recipe:
    """The recipe's keys (dotted paths), read once each, with their lines and interpolations."""

    def __init__(self, data: dict[str, Any], text: str, draft: JobDraft):
        self.data = data
        self.lines = key_lines(text)
        self.draft = draft
        self.read: set[str] = set()

    def has(self, key: str) -> bool:
        return self._lookup(key) is not _MISSING

    def origin(self, key: str) -> Origin:
        value = self._lookup(key)
        line = self.lines.get(tuple(key.split(".")))
        shown = f"{key}: {_show(self._raw(key))}"
        if isinstance(self._raw(key), str) and _INTERPOLATION.match(self._raw(key)):
            shown += f" (= {_show(value)})"
        return Origin(shown, self.draft.source, line)

    def value(self, key: str) -> Any:
        """*key*'s value (interpolations followed), marked read; _MISSING where absent."""
        self.read.add(key)
        return self._lookup(key)

    def number(self, key: str, fallback: int | None = None, *, low: int = 1) -> Traced | None:
        value = self.value(key)
        if value is _MISSING or value is None:
            if fallback is None:
                return None
            return traced(fallback, default(f"{BASE}'s default {fallback} for {key}"))
        origin = self.origin(key)
        return traced(whole(value, origin, key, self.draft, low=low), origin)

    def setting(self, key: str, fallback: int) -> Traced:
        item = self.number(key, fallback)
        assert item is not None
        return item

    def switch(self, key: str, fallback: bool) -> Traced:
        value = self.value(key)
        if value is _MISSING or value is None:
            return traced(fallback, default(f"{BASE}'s default {str(fallback).lower()} for {key}"))
        if not isinstance(value, bool):
            raise self.draft.error(f"expected true or false, got {_show(value)}", self.origin(key), key)
        return traced(value, self.origin(key))

    def first(self, *keys: str) -> str | None:
        """The first of *keys* the recipe sets (NeMo's name, then Megatron-Bridge's)."""
        return next((k for k in keys if self.has(k)), None)

    def _raw(self, key: str) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def _lookup(self, key: str, depth: int = 0) -> Any:
        value = self._raw(key)
        match = _INTERPOLATION.match(value) if isinstance(value, str) else None
        if match is None:
            return value
        target = _target(key, match.group(1))
        if depth > 8 or not (self.has(target) or self.has(target.removeprefix("training."))):
            raise self.draft.error(f"an interpolation atpsim cannot follow: {value}; expected "
                                   "${...} naming another key of this file", self.origin_raw(key), key)
        return self._lookup(target if self.has(target) else target.removeprefix("training."), depth + 1)

    def origin_raw(self, key: str) -> Origin:
        return Origin(f"{key}: {_show(self._raw(key))}", self.draft.source,
                      self.lines.get(tuple(key.split("."))))  # fmt: skip

    def leaves(self) -> list[str]:
        """Every key whose value is not a mapping (a list is one value), in file order."""
        found: list[str] = []

        def walk(node: Any, prefix: str) -> None:
            for name, value in node.items():
                key = f"{prefix}{name}"
                if isinstance(value, dict) and value:
                    walk(value, key + ".")
                else:
                    found.append(key)

        walk(self.data, "")
        return found


_MISSING: Any = object()


def _target(key: str, reference: str) -> str:
    """The key an interpolation *reference* at *key* names (``.x``: a sibling of *key*)."""
    if not reference.startswith("."):
        return reference
    parent = key.split(".")[:-1]
    dots = len(reference) - len(reference.lstrip("."))
    base = parent[: len(parent) - (dots - 1)] if dots > 1 else parent
    return ".".join([*base, reference.lstrip(".")])


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[...]" if len(value) > 4 else str(value)
    return str(value)


def import_nemo(path: str | Path, options: ImportOptions) -> ImportedJob:
    """The job scenario of the NeMo recipe *path* (module docstring)."""
    source = str(path)
    text = read_text(path, "the NeMo recipe")
    data = load_yaml(text, source)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise AtpsimError("expected a NeMo recipe: a mapping with a 'model:' section", source=source)
    draft = JobDraft(KIND, source, FRAMEWORK)
    recipe = _Recipe(data, text, draft)
    _machine(recipe, draft)
    tp = recipe.setting("model.tensor_model_parallel_size", 1)
    _model(recipe, draft, options, tp.value)
    _layout(recipe, draft, tp)
    _sort_the_rest(recipe, draft)
    model = draft.model
    draft.model = {"name": traced(scenario_name(source, options), default("the input file's name")),
                   **model}  # fmt: skip
    description = (f"{model['layers'].value} layers, hidden {model['hidden'].value}, "
                   f"{model['heads'].value} heads, as the NeMo recipe {source} trains it "
                   "(atpsim import nemo)")  # fmt: skip
    return finish(draft, options, description)


def _machine(recipe: _Recipe, draft: JobDraft) -> None:
    """The GPU count: trainer.num_nodes x trainer.devices (both default 1)."""
    nodes = recipe.setting("trainer.num_nodes", 1)
    devices = recipe.value("trainer.devices")
    if isinstance(devices, int) and not isinstance(devices, bool) or devices in (_MISSING, None):
        per_node = recipe.setting("trainer.devices", 1)
        draft.layout["gpus"] = traced(nodes.value * per_node.value, *nodes.origins, *per_node.origins,
                                      how=f"{nodes.value} nodes x {per_node.value} devices")  # fmt: skip
        draft.gpus_per_node = per_node
    else:
        draft.unknown(recipe.origin("trainer.devices"), f"not a device count; {param('gpus')} gives the GPUs")


def _model(recipe: _Recipe, draft: JobDraft, options: ImportOptions, tp: int) -> None:
    model = draft.model
    model["layers"] = _required(recipe, "model.num_layers")
    model["hidden"] = hidden = _required(recipe, "model.hidden_size")
    model["heads"] = _required(recipe, "model.num_attention_heads")
    model["seq"] = _required(recipe, "model.encoder_seq_length", "model.seq_length")
    gated = _activation(recipe, draft)
    if gated is not None:
        model["ffn"] = gated
    model["ffn_hidden"] = recipe.number("model.ffn_hidden_size") or traced(
        4 * hidden.value, default(f"Megatron-Core's ffn_hidden_size where none is given: "
                                  f"4 x {hidden.value}"))  # fmt: skip
    groups = recipe.number("model.num_query_groups")
    if groups is not None:
        model["kv_heads"] = groups
    model["dtype"] = _dtype(recipe, draft)
    model["tie_embeddings"] = recipe.switch("model.share_embeddings_and_output_weights", True)
    model["vocab"] = _vocab(recipe, draft, options, tp)
    experts = recipe.number("model.num_moe_experts", low=0)
    if experts is not None and experts.value:
        model["experts"] = experts
        model["top_k"] = recipe.setting("model.moe_router_topk", 2)


def _required(recipe: _Recipe, *keys: str) -> Traced:
    key = recipe.first(*keys)
    item = recipe.number(key) if key else None
    if item is None:
        raise recipe.draft.error("missing: a recipe gives its model's shape (the base config's "
                                 "toy model is no default for it)", key=keys[0])  # fmt: skip
    return item


def _activation(recipe: _Recipe, draft: JobDraft) -> Traced | None:
    """``swiglu`` for a gated MLP (NeMo's activation, or Megatron-Bridge's gated_linear_unit)."""
    if recipe.has("model.gated_linear_unit") and not recipe.has("model.activation"):
        gated = recipe.switch("model.gated_linear_unit", False)
        return traced("swiglu", *gated.origins) if gated.value else None
    value = recipe.value("model.activation")
    if value is _MISSING or value is None:
        return None
    origin = recipe.origin("model.activation")
    if value in GATED:
        how = "" if "swiglu" in str(value) else f"{value} runs the same GEMMs as SwiGLU"
        return traced("swiglu", origin, how=how)
    if value not in UNGATED:
        raise draft.error(f"unknown activation {value!r}; expected one of "
                          f"{', '.join(GATED + UNGATED)}{did_you_mean(value, GATED + UNGATED)}",
                          origin, "model.activation")  # fmt: skip
    if value != "gelu":
        draft.agrees(origin, f"{value} runs the same GEMMs as GeLU")
    return None


def _dtype(recipe: _Recipe, draft: JobDraft) -> Traced:
    """trainer.precision (16 / bf16 / 32, with or without -mixed), FP8 with model.fp8."""
    key = recipe.first("trainer.precision", "mixed_precision")
    if key is None:
        precision = traced("bf16", default(f"{BASE}'s default precision bf16 (trainer.precision)"))
    else:
        value = str(recipe.value(key)).lower().replace("_", "-")
        names = {"16": "fp16", "16-mixed": "fp16", "fp16": "fp16", "fp16-mixed": "fp16",
                 "bf16": "bf16", "bf16-mixed": "bf16", "32": "fp32", "32-true": "fp32",
                 "fp32": "fp32"}  # fmt: skip
        if value not in names:
            raise draft.error(f"expected a precision (16, bf16, 32, with or without -mixed), got "
                              f"{value!r}", recipe.origin(key), key)  # fmt: skip
        precision = traced(names[value], recipe.origin(key))
    fp8 = recipe.switch("model.fp8", False)
    if fp8.value:
        return traced("fp8", *fp8.origins, *precision.origins,
                      how="FP8 GEMMs (Transformer Engine), bf16 elsewhere")
    return precision


def _vocab(recipe: _Recipe, draft: JobDraft, options: ImportOptions, tp: int) -> Traced:
    """The tokenizer's tokens (``--vocab``, model.vocab_size, or a tokenizer whose size is
    published) padded as Megatron-LM pads them (NeMo's _vocab_size_with_padding)."""
    divisible = recipe.setting("model.make_vocab_size_divisible_by", 128)
    if options.vocab is not None:
        tokens = traced(options.vocab, option_origin(options, "vocab"))
    elif recipe.has("model.vocab_size"):
        tokens = recipe.setting("model.vocab_size", 0)
    else:
        tokens = _tokenizer(recipe, draft)
    size = padded_vocab(tokens.value, divisible.value, tp)
    return traced(size, *tokens.origins, *divisible.origins,
                  how=f"{tokens.value:,} tokens padded to a multiple of {divisible.value} x TP {tp}")


def _tokenizer(recipe: _Recipe, draft: JobDraft) -> Traced:
    value = recipe.value("model.tokenizer.type")
    if value is _MISSING or value is None:
        return traced(KNOWN_TOKENIZERS["GPT2BPETokenizer"], default(
            f"{BASE}'s default tokenizer GPT2BPETokenizer: GPT-2's 50,257 tokens"))
    if value in KNOWN_TOKENIZERS:
        return traced(KNOWN_TOKENIZERS[value], recipe.origin("model.tokenizer.type"),
                      how=f"{value}'s published vocabulary")
    raise draft.error(f"the vocabulary of tokenizer {value!r} is not known: give {param('vocab')} to "
                      "atpsim import", recipe.origin("model.tokenizer.type"), "model.tokenizer.type")


def _layout(recipe: _Recipe, draft: JobDraft, tp: Traced) -> None:
    layout = draft.layout
    layout["tp"] = tp
    layout["pp"] = recipe.setting("model.pipeline_model_parallel_size", 1)
    layout["cp"] = recipe.setting("model.context_parallel_size", 1)
    layout["ep"] = recipe.setting("model.expert_model_parallel_size", 1)
    virtual = recipe.number("model.virtual_pipeline_model_parallel_size")
    if virtual is not None:
        layout["virtual_stages"] = virtual
    micro = recipe.first("model.micro_batch_size", "train.micro_batch_size") or "model.micro_batch_size"
    layout["micro_batch"] = recipe.setting(micro, 4)
    batch = recipe.first("model.global_batch_size", "train.global_batch_size")
    if batch is not None:
        layout["global_batch"] = recipe.setting(batch, 8)
    else:
        layout["global_batch"] = traced(8, default(f"{BASE}'s default 8 for model.global_batch_size"))
    sequence_parallel = recipe.switch("model.sequence_parallel", False)
    if sequence_parallel.value and tp.value == 1:
        sequence_parallel = traced(False, *sequence_parallel.origins, *tp.origins,
                                   how="Megatron-Core turns it off at TP 1")  # fmt: skip
    layout["sequence_parallel"] = sequence_parallel
    layout["recompute"] = _recompute(recipe, draft)
    layout["zero"] = _zero(recipe)


def _recompute(recipe: _Recipe, draft: JobDraft) -> Traced:
    key = recipe.first("model.activations_checkpoint_granularity", "model.recompute_granularity")
    value = recipe.value(key) if key else None
    if value is None or value is _MISSING:
        return traced("none", default(f"{BASE}'s default null for "
                                      "model.activations_checkpoint_granularity: no recomputation"))
    assert key is not None
    if value not in ("selective", "full"):
        raise draft.error(f"expected selective, full or null, got {_show(value)}",
                          recipe.origin(key), key)  # fmt: skip
    return traced(value, recipe.origin(key))


def _zero(recipe: _Recipe) -> Traced:
    if recipe.has("optimizer.use_distributed_optimizer"):
        item = recipe.switch("optimizer.use_distributed_optimizer", False)
        return traced(int(item.value), *item.origins)
    name = recipe.value("model.optim.name")
    if name is _MISSING or name is None:
        return traced(0, default(f"{BASE}'s default optimizer fused_adam: no sharding (ZeRO 0)"))
    sharded = name in DISTRIBUTED_OPTIMIZERS
    return traced(int(sharded), recipe.origin("model.optim.name"),
                  how="the distributed optimizer shards optimizer state over DP: ZeRO-1" if sharded
                  else "optimizer state on every DP rank: ZeRO 0")  # fmt: skip


def _sort_the_rest(recipe: _Recipe, draft: JobDraft) -> None:
    """Every key not read: ignored (by section or key), not modelled, or not understood."""
    sections_seen: set[str] = set()
    known = [*IGNORED_KEYS, *NOT_MODELLED, *recipe.read]
    for key in recipe.leaves():
        if key in recipe.read:
            continue
        table = {**NOT_MODELLED, **OPTIM_NOT_MODELLED}
        if key in table:
            why, agrees = table[key]
            value = recipe._raw(key)
            if agrees(value):
                draft.ignored(recipe.origin_raw(key), "as atpsim simulates it")
            else:
                draft.not_modelled(recipe.origin_raw(key), why)
            continue
        section = next((s for s in IGNORED_SECTIONS if key == s or key.startswith(s + ".")), None)
        if section is not None:
            if section not in sections_seen:
                sections_seen.add(section)
                line = recipe.lines.get(tuple(section.split(".")))
                draft.ignored(Origin(section, draft.source, line), IGNORED_SECTIONS[section])
        elif key in IGNORED_KEYS:
            draft.ignored(recipe.origin_raw(key), IGNORED_KEYS[key])
        else:
            hint = did_you_mean(key, known)
            draft.unknown(recipe.origin_raw(key), "not a key atpsim reads"
                          + (hint if hint.startswith(" (did you mean") else ""))  # fmt: skip
