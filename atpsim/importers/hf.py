"""A Hugging Face ``config.json`` as a job scenario's model (and a job around it).

The config gives the model's shape (``transformers``' names; GPT-2's older ones too):

=============================================  ================================================
config.json key (default)                      scenario key
=============================================  ================================================
hidden_size (n_embd), num_attention_heads      model.hidden, .heads, .layers
(n_head), num_hidden_layers (n_layer)
num_key_value_heads (num_attention_heads)      model.kv_heads
intermediate_size (n_inner; 4 x hidden)        model.ffn_hidden
hidden_act / activation_function, with the     model.ffn: swiglu where the MLP is gated
model_type (llama, mistral, mixtral, qwen2,    (gate, up and down projections)
... are gated)
vocab_size                                     model.vocab (as the checkpoint has it)
tie_word_embeddings (the model_type's class    model.tie_embeddings
default: false for llama, mistral, mixtral,
qwen2; PretrainedConfig's true otherwise)
max_position_embeddings (n_positions)          model.seq, unless --seq gives the training length
torch_dtype (float32)                          model.dtype (the checkpoint's dtype, taken as
                                               the training dtype)
num_local_experts / num_experts,               model.experts, .top_k, .expert_ffn_hidden
num_experts_per_tok, intermediate_size
(moe_intermediate_size)
=============================================  ================================================

A config says nothing about training, so the job around the model is ``atpsim import``'s
options (``--gpus`` or ``-t``, ``--tp``, ``--pp``, ``--micro-batch``, ``--global-batch``,
``--seq``) and, for what they leave out, Megatron-LM's defaults (TP 1, PP 1, micro-batch 1,
global batch = micro-batch x DP) and atpsim's job defaults for the rest (sequence
parallelism with TP, selective recomputation, ZeRO-1: Megatron-LM's recommended settings,
:mod:`atpsim.training.defaults`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atpsim.errors import AtpsimError, param, read_text
from atpsim.importers.common import (
    ImportOptions,
    JobDraft,
    finish,
    key_lines,
    option_origin,
    scenario_name,
    whole,
)
from atpsim.importers.trace import ImportedJob, Origin, Traced, default, traced
from atpsim.training.defaults import JOB_DEFAULTS

KIND = "hf"
FRAMEWORK = "Megatron-LM"
OPTIONS = frozenset({"topology", "gpus", "tp", "pp", "micro_batch", "global_batch", "seq",
                     "name", "out_dir"})  # fmt: skip

#: Model types whose MLP is gated (gate, up and down projections: SwiGLU's three matrices).
GATED_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma",
                         "gemma2", "phi3", "olmo", "olmo2", "granite"})  # fmt: skip
#: Model types whose MLP is GPT's two matrices.
PLAIN_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "bloom", "opt", "falcon", "gpt_bigcode"})
#: ``tie_word_embeddings``' default of each model type's config class where it is not
#: PretrainedConfig's True (transformers' LlamaConfig, MistralConfig, MixtralConfig,
#: Qwen2Config, GPTNeoXConfig).
UNTIED_BY_DEFAULT = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                               "gpt_neox"})  # fmt: skip
#: torch_dtype -> model.dtype.
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}

#: Each shape key and the older names some configs use for it.
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer"),
    "intermediate_size": ("intermediate_size", "n_inner"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions"),
    "hidden_act": ("hidden_act", "activation_function"),
    "num_local_experts": ("num_local_experts", "num_experts"),
}
#: Keys understood, with no bearing on an iteration's time.
IGNORED_KEYS: dict[str, str] = {
    **dict.fromkeys(("architectures", "transformers_version", "_name_or_path",
                     "auto_map"), "the model's name and code"),
    **dict.fromkeys(("bos_token_id", "eos_token_id", "pad_token_id", "use_cache",
                     "output_router_logits", "return_dict"), "inference or tokenizer setting"),
    **dict.fromkeys(("initializer_range", "attention_dropout", "hidden_dropout", "resid_pdrop",
                     "embd_pdrop", "attn_pdrop", "router_aux_loss_coef", "router_jitter_noise",
                     "layer_norm_eps", "layer_norm_epsilon", "pretraining_tp", "rope_scaling"),
                    "numerics or initialization"),
}  # fmt: skip
#: Keys understood that change a real run's time but atpsim does not simulate: why, and
#: whether a value (given the whole config) agrees with how atpsim simulates the model.
NOT_MODELLED: dict[str, tuple[str, Callable[[Any, dict[str, Any]], bool]]] = {
    "attention_bias": ("linear biases are counted as Megatron-LM's default (add_bias_linear): "
                       "under 0.01% of the parameters", lambda v, c: v is True),
    "mlp_bias": ("linear biases are counted as Megatron-LM's default (add_bias_linear)",
                 lambda v, c: v is True),
    "sliding_window": ("sliding-window attention is timed as full attention",
                       lambda v, c: v is None),
    "head_dim": ("a head's width is hidden / heads",
                 lambda v, c: v == c.get("hidden_size", 0) // max(1, c.get("num_attention_heads", 1))),
    "shared_expert_intermediate_size": ("shared experts are not modelled", lambda v, c: not v),
    "rms_norm_eps": ("RMSNorm is timed as LayerNorm", lambda v, c: False),
    "rope_theta": ("rotary position embeddings are not timed", lambda v, c: False),
}  # fmt: skip


def import_hf(path: str | Path, options: ImportOptions) -> ImportedJob:
    """The job scenario of the model in the Hugging Face ``config.json`` *path*, trained as
    the options say (module docstring)."""
    source = str(path)
    draft = JobDraft(KIND, source, FRAMEWORK)
    draft.model = hf_model(path, draft, options)
    draft.model = {"name": traced(scenario_name(source, options), default("the input file's name")),
                   **draft.model}  # fmt: skip
    draft.notes.append("A config.json describes the model only: the job's layout and batch are "
                       "atpsim import's options, else Megatron-LM's and atpsim's defaults.")
    option_layout(draft, options)
    model = draft.model
    description = (f"{model['layers'].value} layers, hidden {model['hidden'].value}, "
                   f"{model['heads'].value} heads, the model of the Hugging Face config {source} "
                   "(atpsim import hf)")  # fmt: skip
    return finish(draft, options, description)


def model_keys(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """The scenario ``model`` keys of the ``config.json`` *path* as plain values (what a
    scenario's ``model: {hf_config: PATH}`` takes), and one line for each key of the file not
    understood or not modelled."""
    draft = JobDraft(KIND, str(path), FRAMEWORK)
    model = hf_model(path, draft, ImportOptions())
    lines = [f"{f.origin.describe()}: {f.kind}: {f.why}" for f in draft.findings
             if f.kind != "ignored"]  # fmt: skip
    return {key: item.value for key, item in model.items()}, lines


def hf_model(path: str | Path, draft: JobDraft, options: ImportOptions) -> dict[str, Traced]:
    """The scenario's ``model`` keys of the ``config.json`` *path* (its unread keys sorted
    into *draft*'s findings); ``options.seq`` sets the sequence."""
    source = str(path)
    text = read_text(path, "the Hugging Face config.json")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise AtpsimError(f"line {error.lineno}, column {error.colno}: invalid JSON: {error.msg}",
                          source=source) from None  # fmt: skip
    if not isinstance(config, dict):
        raise AtpsimError("expected a JSON object of model settings", source=source)
    reader = _Config(config, key_lines(text), source, draft)
    model = _shape(reader, options)
    reader.sort_the_rest()
    return model


class _Config:
    """The config's keys, read once each, with their lines."""

    def __init__(self, config: dict[str, Any], lines: dict[tuple[str, ...], int], source: str,
                 draft: JobDraft):  # fmt: skip
        self.config, self.lines, self.source, self.draft = config, lines, source, draft
        self.read: set[str] = set()

    def key(self, name: str) -> str | None:
        """The key the config spells *name* with (itself or an older alias), None if absent."""
        return next((k for k in ALIASES.get(name, (name,)) if k in self.config), None)

    def origin(self, key: str) -> Origin:
        return Origin(f"{key}: {json.dumps(self.config[key])}", self.source, self.lines.get((key,)))

    def value(self, name: str) -> tuple[Any, Origin] | None:
        key = self.key(name)
        if key is None or self.config[key] is None:
            if key is not None:
                self.read.add(key)
            return None
        self.read.add(key)
        return self.config[key], self.origin(key)

    def number(self, name: str, *, low: int = 1) -> Traced | None:
        found = self.value(name)
        if found is None:
            return None
        value, origin = found
        return traced(whole(value, origin, origin.text.split(":")[0], self.draft, low=low), origin)

    def required(self, name: str) -> Traced:
        item = self.number(name)
        if item is None:
            raise AtpsimError("missing key: the model's shape needs it", source=self.source,
                              key=name)  # fmt: skip
        return item

    def sort_the_rest(self) -> None:
        for key in self.config:
            if key in self.read:
                continue
            origin = self.origin(key)
            if key in NOT_MODELLED:
                why, agrees = NOT_MODELLED[key]
                if agrees(self.config[key], self.config):
                    self.draft.ignored(origin, "as atpsim simulates it")
                else:
                    self.draft.not_modelled(origin, why)
            elif key in IGNORED_KEYS:
                self.draft.ignored(origin, IGNORED_KEYS[key])
            else:
                self.draft.unknown(origin, "not a key atpsim reads")


def _shape(reader: _Config, options: ImportOptions) -> dict[str, Traced]:
    model: dict[str, Traced] = {}
    model["layers"] = reader.required("num_hidden_layers")
    model["hidden"] = hidden = reader.required("hidden_size")
    model["heads"] = heads = reader.required("num_attention_heads")
    model["seq"] = _sequence(reader, options)
    kv = reader.number("num_key_value_heads")
    if kv is not None and kv.value != heads.value:
        model["kv_heads"] = kv
    found_type = reader.value("model_type")
    model_type = str(found_type[0]) if found_type else ""
    gated = _gated(reader, model_type)
    if gated is not None:
        model["ffn"] = gated
    model["ffn_hidden"] = reader.number("intermediate_size") or traced(
        4 * hidden.value, default(f"intermediate_size not given: 4 x {hidden.value}"))
    model["dtype"] = _dtype(reader)
    model["tie_embeddings"] = _tied(reader, model_type)
    vocab = reader.number("vocab_size")
    if vocab is not None:
        model["vocab"] = vocab
    else:
        reader.draft.not_modelled(default("no vocab_size"), "no embedding or LM head is simulated")
    _experts(reader, model)
    return model


def _sequence(reader: _Config, options: ImportOptions) -> Traced:
    if options.seq is not None:
        key = reader.key("max_position_embeddings")
        if key is not None:
            reader.read.add(key)
            reader.draft.ignored(reader.origin(key), "the longest sequence the model takes; "
                                 f"{param('seq', options.seq)} is the training length")  # fmt: skip
        return traced(options.seq, option_origin(options, "seq"))
    item = reader.number("max_position_embeddings")
    if item is None:
        raise AtpsimError("the sequence length is not in the config (no max_position_embeddings): "
                          f"give {param('seq')}", source=reader.source, key="max_position_embeddings")
    return traced(item.value, *item.origins, how="the longest sequence the model takes; "
                  f"{param('seq')} sets the training length")  # fmt: skip


def _gated(reader: _Config, model_type: str) -> Traced | None:
    found = reader.value("hidden_act")
    act = str(found[0]) if found else ""
    origins = (found[1],) if found else ()
    type_origin = reader.origin("model_type") if "model_type" in reader.config else None
    if model_type in GATED_TYPES:
        assert type_origin is not None
        return traced("swiglu", type_origin, *origins, how=f"{model_type}'s MLP is gated "
                      "(gate, up and down projections)")  # fmt: skip
    if model_type in PLAIN_TYPES:
        return None
    if act in ("silu", "swish", "swiglu"):
        reader.draft.notes.append(f"model_type {model_type or '(none)'} is not one atpsim knows: "
                                  f"its MLP is taken as gated (SwiGLU) for hidden_act {act}")
        return traced("swiglu", *origins, how="a SiLU MLP taken as gated (SwiGLU)")
    return None


def _dtype(reader: _Config) -> Traced:
    found = reader.value("torch_dtype")
    if found is None:
        return traced("fp32", default("transformers' default torch_dtype: float32"))
    value, origin = found
    if value not in DTYPES:
        raise reader.draft.error(f"expected one of {', '.join(DTYPES)}, got {value!r}", origin,
                                 "torch_dtype")  # fmt: skip
    return traced(DTYPES[value], origin, how="the checkpoint's dtype, taken as the training dtype")


def _tied(reader: _Config, model_type: str) -> Traced:
    found = reader.value("tie_word_embeddings")
    if found is not None:
        value, origin = found
        return traced(bool(value), origin)
    tied = model_type not in UNTIED_BY_DEFAULT
    config_class = f"{model_type}'s config class" if not tied else "PretrainedConfig"
    return traced(tied, default(f"{config_class} default tie_word_embeddings={tied}"))


def _experts(reader: _Config, model: dict[str, Traced]) -> None:
    experts = reader.number("num_local_experts", low=0)
    if experts is None or experts.value == 0:
        return
    model["experts"] = experts
    top_k = reader.number("num_experts_per_tok")
    if top_k is not None:
        model["top_k"] = top_k
    per_expert = reader.number("moe_intermediate_size")
    model["expert_ffn_hidden"] = per_expert or traced(
        model["ffn_hidden"].value, *model["ffn_hidden"].origins, how="each expert's MLP")


def option_layout(draft: JobDraft, options: ImportOptions) -> None:
    """The job's layout from the options, Megatron-LM's defaults (TP 1, PP 1, micro-batch 1)
    and atpsim's job defaults (:mod:`atpsim.training.defaults`) for the rest."""
    layout = draft.layout
    for name, fallback in (("tp", 1), ("pp", 1), ("micro_batch", 1)):
        value = getattr(options, name)
        layout[name] = (traced(value, option_origin(options, name)) if value is not None
                        else traced(fallback, default(f"{FRAMEWORK}'s default {fallback} "
                                                      f"({param(name)} not given)")))  # fmt: skip
    layout["cp"] = traced(1, default("no context parallelism"))
    layout["ep"] = traced(1, default("no expert parallelism"))
    if options.global_batch is not None:
        layout["global_batch"] = traced(options.global_batch, option_origin(options, "global_batch"))
    tp = layout["tp"].value
    layout["sequence_parallel"] = traced(tp > 1, default(
        f"atpsim's job default: {JOB_DEFAULTS['sequence_parallel'].source}"))
    for key in ("recompute", "zero"):
        layout[key] = traced(JOB_DEFAULTS[key].value,
                             default(f"atpsim's job default: {JOB_DEFAULTS[key].source}"))

