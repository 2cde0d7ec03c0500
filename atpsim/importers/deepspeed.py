"""A DeepSpeed JSON config as a job scenario, the model named apart.

A DeepSpeed config describes how a model trains (batch, ZeRO stage, precision), not the model
or the tensor and pipeline split (those are the training script's: Megatron-DeepSpeed's
``--tensor-model-parallel-size``, a PipelineModule's stages). So ``atpsim import deepspeed
CONFIG --model MODEL`` takes the model from ``--model`` (a preset such as ``gpt3-13b``, or a
Hugging Face ``config.json``, read as :mod:`atpsim.importers.hf` reads it), the split from
``--tp`` and ``--pp`` (default 1 each: DeepSpeed's plain data parallelism) and the GPU count
from ``--gpus`` or ``-t``; the config gives the rest, with DeepSpeed's defaults
(``deepspeed/runtime/config.py``, ``constants.py``) and rules:

==========================================  ==================================================
config key (DeepSpeed's default)            scenario key
==========================================  ==================================================
train_micro_batch_size_per_gpu,             parallelism.micro_batch and global_batch: given
gradient_accumulation_steps,                two, DeepSpeed derives the third
train_batch_size                            (_set_batch_related_parameters: train = micro x
                                            accumulation x DP; one alone: accumulation 1)
zero_optimization.stage (0)                 parallelism.zero: 0 or 1; stage 2 (gradients
                                            sharded too) is simulated as 1, its memory
                                            overstated; stage 3 is refused (not modelled)
bf16.enabled / fp16.enabled (fp32)          model.dtype
activation_checkpointing (none)             parallelism.recompute: full where the section is
                                            given (DeepSpeed's checkpointing recomputes whole
                                            layers), else none
==========================================  ==================================================

Ranks are ordered as DeepSpeed's ``PipeModelDataParallelTopology`` orders them: TP innermost,
then data parallelism, pipeline stages outermost (``order: [tp, dp, pp]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from atpsim.compute.models import model_preset, preset_names
from atpsim.errors import AtpsimError, did_you_mean, param, read_text
from atpsim.importers.common import (
    ImportOptions,
    JobDraft,
    finish,
    key_lines,
    option_origin,
    scenario_name,
    topology_gpus,
    whole,
)
from atpsim.importers.hf import hf_model
from atpsim.importers.trace import ImportedJob, Origin, Traced, default, traced

KIND = "deepspeed"
FRAMEWORK = "DeepSpeed"
OPTIONS = frozenset({"topology", "gpus", "model", "tp", "pp", "seq", "name", "out_dir"})

#: Sections understood, with no bearing on an iteration's time.
IGNORED_SECTIONS: dict[str, str] = {
    **dict.fromkeys(("optimizer", "scheduler", "gradient_clipping", "prescale_gradients",
                     "gradient_predivide_factor", "sparse_gradients"), "optimizer settings"),
    **dict.fromkeys(("steps_per_print", "wall_clock_breakdown", "dump_state", "tensorboard",
                     "wandb", "csv_monitor", "comet", "flops_profiler", "comms_logger",
                     "memory_breakdown", "checkpoint"), "logging, profiling or checkpoints"),
    "fp16": "loss scaling", "bf16": "bf16 settings", "amp": "mixed-precision settings",
    "zero_allow_untested_optimizer": "optimizer settings", "zero_force_ds_cpu_optimizer":
    "optimizer settings", "communication_data_type": "the reduction's dtype",
}  # fmt: skip
#: Keys understood that change a real run's time or memory, which atpsim does not simulate,
#: with the values that agree with how atpsim simulates the run.
NOT_MODELLED: dict[str, tuple[str, Any]] = {
    "zero_optimization.offload_optimizer": ("optimizer state offloaded to CPU or NVMe is not "
                                            "modelled", None),
    "zero_optimization.offload_param": ("parameters offloaded to CPU or NVMe are not modelled",
                                        None),
    "zero_optimization.overlap_comm": ("atpsim overlaps the gradient reduction with the "
                                       "backward pass", True),
    "zero_optimization.reduce_bucket_size": ("gradient buckets are atpsim's "
                                             "(JobConfig.bucket_bytes)", None),
    "zero_optimization.allgather_bucket_size": ("the parameter all-gather is one call", None),
    "activation_checkpointing.partition_activations": ("stored activations are not split over "
                                                       "TP", False),
    "activation_checkpointing.cpu_checkpointing": ("checkpoints kept on the CPU are not "
                                                   "modelled", False),
    "pipeline": ("the pipeline is atpsim's 1F1B over the stages asked for", None),
}  # fmt: skip
#: Keys of zero_optimization with no bearing on an iteration's time.
ZERO_IGNORED = ("contiguous_gradients", "reduce_scatter", "allgather_partitions",
                "round_robin_gradients", "load_from_fp32_weights", "elastic_checkpoint",
                "ignore_unused_parameters", "stage3_gather_16bit_weights_on_model_save",
                "sub_group_size", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")  # fmt: skip


class _Config:
    """The config's keys (dotted paths), read once each, with their lines."""

    def __init__(self, data: dict[str, Any], text: str, draft: JobDraft):
        self.data, self.draft = data, draft
        self.lines = key_lines(text)
        self.read: set[str] = set()

    def get(self, key: str) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        self.read.add(key)
        return node

    def origin(self, key: str) -> Origin:
        node: Any = self.data
        for part in key.split("."):
            node = node[part]
        return Origin(f"{key}: {json.dumps(node)}", self.draft.source,
                      self.lines.get(tuple(key.split("."))))  # fmt: skip

    def number(self, key: str, *, low: int = 1) -> Traced | None:
        value = self.get(key)
        if value is None:
            return None
        if value == "auto":
            raise self.draft.error("'auto' is filled in by the Hugging Face Trainer; expected the "
                                   "number", self.origin(key), key)  # fmt: skip
        return traced(whole(value, self.origin(key), key, self.draft, low=low), self.origin(key))

    def enabled(self, section: str) -> Traced | None:
        """The section's ``enabled: true`` (traced), else None."""
        value = self.get(f"{section}.enabled")
        if value is True or value == "auto":
            return traced(True, self.origin(f"{section}.enabled"))
        return None

    def leaves(self) -> list[str]:
        found: list[str] = []

        def walk(node: dict[str, Any], prefix: str) -> None:
            for name, value in node.items():
                if isinstance(value, dict) and value and f"{prefix}{name}" not in NOT_MODELLED:
                    walk(value, f"{prefix}{name}.")
                else:
                    found.append(f"{prefix}{name}")

        walk(self.data, "")
        return found


def import_deepspeed(path: str | Path, options: ImportOptions) -> ImportedJob:
    """The job scenario of the DeepSpeed config *path* with ``options.model`` (module
    docstring)."""
    source = str(path)
    text = read_text(path, "the DeepSpeed config")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise AtpsimError(f"line {error.lineno}, column {error.colno}: invalid JSON: {error.msg}",
                          source=source) from None  # fmt: skip
    if not isinstance(data, dict):
        raise AtpsimError("expected a JSON object of DeepSpeed settings", source=source)
    draft = JobDraft(KIND, source, FRAMEWORK)
    draft.rank_order = ("DeepSpeed's PipeModelDataParallelTopology: TP innermost, then data "
                        "parallelism, pipeline stages outermost")  # fmt: skip
    config = _Config(data, text, draft)
    _model(config, draft, options)
    _layout(config, draft, options)
    _sort_the_rest(config, draft)
    name = draft.model["name"].value
    description = (f"{name} as the DeepSpeed config {source} trains it "
                   f"(atpsim import deepspeed, model {options.model})")  # fmt: skip
    return finish(draft, options, description)


def _model(config: _Config, draft: JobDraft, options: ImportOptions) -> None:
    """The model: a preset, or a Hugging Face config.json; its dtype from the config."""
    if options.model is None:
        raise AtpsimError("a DeepSpeed config does not name its model: expected one (a preset such "
                          "as gpt3-13b, or a Hugging Face config.json)", param="model")  # fmt: skip
    origin = option_origin(options, "model")
    if Path(options.model).is_file():
        model = hf_model(options.model, draft, options)
        draft.model = {"name": traced(scenario_name(options.model, ImportOptions()), origin), **model}
    elif options.model in preset_names():
        preset = model_preset(options.model)
        draft.model = {"name": traced(options.model, origin), "preset": traced(options.model, origin)}
        if options.seq is not None and options.seq != preset.seq:
            draft.model["seq"] = traced(options.seq, option_origin(options, "seq"))
    else:
        raise AtpsimError(f"expected a model preset or a config.json file, got {options.model!r}"
                          f"{did_you_mean(options.model, preset_names())}", param="model")
    draft.model["dtype"] = _dtype(config, draft)


def _dtype(config: _Config, draft: JobDraft) -> Traced:
    bf16, fp16 = config.enabled("bf16"), config.enabled("fp16")
    if bf16 and fp16:
        raise draft.error("bf16 and fp16 both enabled; DeepSpeed takes one", bf16.origins[0],
                          "bf16.enabled")  # fmt: skip
    if bf16 or fp16:
        return traced("bf16" if bf16 else "fp16", *(bf16 or fp16).origins)  # type: ignore[union-attr]
    return traced("fp32", default("DeepSpeed's default precision (neither bf16 nor fp16 "
                                  "enabled): fp32"))  # fmt: skip


def _layout(config: _Config, draft: JobDraft, options: ImportOptions) -> None:
    layout = draft.layout
    for name in ("tp", "pp"):
        value = getattr(options, name)
        layout[name] = (traced(value, option_origin(options, name)) if value is not None else
                        traced(1, default(f"{param(name)} not given: DeepSpeed's plain data "
                                          "parallelism")))
    layout["cp"] = traced(1, default("no context parallelism"))
    layout["ep"] = traced(1, default("no expert parallelism"))
    _batches(config, draft, options)
    layout["sequence_parallel"] = traced(False, default(
        "a DeepSpeed config has no sequence parallelism (Megatron-DeepSpeed's is off unless "
        "its script asks for it)"))  # fmt: skip
    layout["recompute"] = _recompute(config)
    layout["zero"] = _zero(config, draft)


def _batches(config: _Config, draft: JobDraft, options: ImportOptions) -> None:
    """micro-batch and global batch as DeepSpeed's _set_batch_related_parameters sets them:
    given two of train_batch_size, train_micro_batch_size_per_gpu and
    gradient_accumulation_steps, the third follows (train = micro x accumulation x DP); given
    one batch size alone, accumulation is 1; the three must then agree (_batch_assertion)."""
    train = config.number("train_batch_size")
    micro = config.number("train_micro_batch_size_per_gpu")
    steps = config.number("gradient_accumulation_steps")
    layout = draft.layout
    if train is None and micro is None:
        raise draft.error("expected train_batch_size or train_micro_batch_size_per_gpu (DeepSpeed "
                          "asserts one of them)", key="train_batch_size")  # fmt: skip
    gpus = options.gpus if options.gpus is not None else _topology_gpus(options)
    if gpus is None:
        if train is None or micro is None or steps is None:
            raise AtpsimError(f"the batch sizes given need the data-parallel size: give {param('gpus')} "
                              "(or all three of train_batch_size, train_micro_batch_size_per_gpu "
                              "and gradient_accumulation_steps)", source=draft.source)  # fmt: skip
        layout["micro_batch"], layout["global_batch"] = micro, train
        draft.agrees(steps.origins[0], "the accumulation is global batch / (micro-batch x DP)")
        return
    dp = _data_parallel(draft, gpus)
    rule = default("DeepSpeed's _set_batch_related_parameters: train = micro x accumulation x DP")
    if micro is None:
        assert train is not None
        per_step = steps.value if steps else 1
        micro = traced(train.value // dp // per_step, *train.origins, *(steps.origins if steps else ()),
                       rule, how=f"{train.value} / DP {dp} / accumulation {per_step}")  # fmt: skip
    if train is None:
        per_step = steps.value if steps else 1
        train = traced(micro.value * per_step * dp, *micro.origins, *(steps.origins if steps else ()),
                       rule, how=f"{micro.value} x accumulation {per_step} x DP {dp}")  # fmt: skip
    accumulation = steps.value if steps else train.value // (micro.value * dp)
    if accumulation < 1 or train.value != micro.value * accumulation * dp:
        raise draft.error(f"train_batch_size {train.value} is not micro-batch {micro.value} x "
                          f"accumulation {accumulation} x DP {dp} (DeepSpeed asserts it)",
                          train.origins[0], "train_batch_size")  # fmt: skip
    layout["micro_batch"], layout["global_batch"] = micro, train
    if steps is not None and "gradient_accumulation_steps" not in {
            o.text.split(":")[0] for o in (*micro.origins, *train.origins)}:  # fmt: skip
        draft.agrees(steps.origins[0], "the accumulation is global batch / (micro-batch x DP)")


def _topology_gpus(options: ImportOptions) -> int | None:
    item = topology_gpus(options)
    return None if item is None else item.value


def _data_parallel(draft: JobDraft, gpus: int) -> int:
    tp, pp = draft.layout["tp"].value, draft.layout["pp"].value
    if gpus % (tp * pp):
        raise AtpsimError(f"{gpus} GPUs are not a multiple of TP x PP = {tp * pp}",
                          source=draft.source)  # fmt: skip
    return gpus // (tp * pp)


def _recompute(config: _Config) -> Traced:
    if isinstance(config.data.get("activation_checkpointing"), dict):
        line = config.lines.get(("activation_checkpointing",))
        return traced("full", Origin("activation_checkpointing", config.draft.source, line),
                      how="DeepSpeed's activation checkpointing recomputes whole layers")
    return traced("none", default("no activation_checkpointing section: no recomputation"))


def _zero(config: _Config, draft: JobDraft) -> Traced:
    stage = config.number("zero_optimization.stage", low=0)
    if stage is None:
        return traced(0, default("DeepSpeed's default ZeRO stage 0"))
    if stage.value == 2:
        draft.not_modelled(stage.origins[0], "ZeRO-2 shards the gradients too: simulated as "
                           "ZeRO-1 (the same reduce-scatter and all-gather), so the memory per "
                           "rank is overstated by the gradients' share")  # fmt: skip
        return traced(1, *stage.origins, how="ZeRO-2 simulated as ZeRO-1")
    if stage.value > 2:
        raise draft.error(f"ZeRO stage {stage.value} is not modelled (atpsim simulates stage 0, "
                          "1, and 2 as 1); expected 0, 1 or 2", stage.origins[0],
                          "zero_optimization.stage")  # fmt: skip
    return stage


def _sort_the_rest(config: _Config, draft: JobDraft) -> None:
    sections_seen: set[str] = set()
    for key in config.leaves():
        if key in config.read:
            continue
        top = key.split(".")[0]
        if key in NOT_MODELLED:
            why, agrees = NOT_MODELLED[key]
            value = config.get(key)
            if agrees is not None and value == agrees:
                draft.ignored(config.origin(key), "as atpsim simulates it")
            elif value not in (None, False, {}) or agrees is False:
                draft.not_modelled(config.origin(key), why)
            else:
                draft.ignored(config.origin(key), "off")
        elif key.startswith("zero_optimization.") and key.split(".", 1)[1] in ZERO_IGNORED:
            draft.ignored(config.origin(key), "a ZeRO setting with no bearing on the time here")
        elif top in IGNORED_SECTIONS:
            if top not in sections_seen:
                sections_seen.add(top)
                draft.ignored(Origin(top, draft.source, config.lines.get((top,))),
                              IGNORED_SECTIONS[top])  # fmt: skip
        elif top == "activation_checkpointing":
            draft.ignored(config.origin(key), "how the checkpoints are kept")
        else:
            draft.unknown(config.origin(key), "not a key atpsim reads")
