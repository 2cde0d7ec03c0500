"""The settings a training job runs with unless told otherwise: one set, with its sources.

Every entry point takes its job defaults from here: :class:`~atpsim.training.config.JobConfig`
and :func:`atpsim.simulate_job` (one job), ``atpsim plan --global-batch`` and
:func:`atpsim.plan_job`, ``atpsim search`` and job scenarios (a search over layouts). They are
Megatron-LM's recommended settings for GPT training at scale, so that Megatron-LM's 1D tensor
parallelism is compared at its own best and a user's first run is the job they would launch:

- **sequence parallelism** on 1D TP meshes (t, 1): Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models" (MLSys 2023, arXiv:2205.05198) recommend it with
  tensor parallelism (the same bytes on the wire as the all-reduces it
  replaces, activations split t ways). A 2D mesh runs without: the ATP paper has no analogue
  (its sharding specs split a layer's activations over the mesh's second dimension only,
  ``../shared/paper/atp-adaptive-tensor-parallelism.md``), and none is in the literature this project follows. A search over layouts tries
  each 1D layout with and without it (:data:`SEARCH_SEQUENCE_PARALLEL`) and keeps what it is
  told to keep, so the comparison does not hinge on the switch.
- **selective activation recomputation** (recompute attention's softmax and dropout only):
  Korthikanti et al. recommend it with sequence parallelism.
- **ZeRO-1** (Megatron-LM's distributed optimizer, ``--use-distributed-optimizer``: optimizer
  state sharded over the data-parallel ranks, gradients reduce-scattered and parameters
  all-gathered): Megatron-Core's "Distributed Optimizer" guide recommends it for large models.
- **1F1B** pipeline schedule: Narayanan et al., "Efficient Large-Scale Language Model Training on
  GPU Clusters Using Megatron-LM" (SC 2021), its default schedule (PipeDream-Flush: the bubble
  of GPipe with activations for at most p micro-batches in flight).
- **the model preset's vocabulary** (:data:`atpsim.compute.models.PRESET_VOCAB`: GPT-2/3's 50,257
  tokens padded to 51,200, a multiple of 128 x TP as Megatron-LM pads; Narayanan et al. Table 1;
  Llama 3.1's 128,256), or the vocabulary given with the model (``model.vocab``); 0 (no
  embedding or LM head) for a model without either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from atpsim.compute.models import PRESET_VOCAB, ModelConfig


@dataclass(frozen=True)
class Default:
    """One job setting's default *value* and the *source* that recommends it."""

    value: Any
    source: str


#: The job settings' defaults (the module docstring says why each).
JOB_DEFAULTS: dict[str, Default] = {
    "sequence_parallel": Default(True, "Korthikanti et al. 2022 (arXiv:2205.05198), 1D TP only"),
    "recompute": Default("selective", "Korthikanti et al. 2022"),
    "zero": Default(1, "Megatron-LM's distributed optimizer (Megatron-Core guide)"),
    "schedule": Default("1f1b", "Narayanan et al. SC 2021"),
    "vocab": Default(None, "the model preset's (PRESET_VOCAB) or model.vocab, else 0"),
}

#: What a search over layouts tries on each 1D TP layout: sequence parallelism on and off, so
#: Megatron-LM's 1D TP is compared at its faster setting (a 2D mesh runs without).
SEARCH_SEQUENCE_PARALLEL = (True, False)


def job_default(key: str) -> Any:
    """The default value of job setting *key* (:data:`JOB_DEFAULTS`)."""
    return JOB_DEFAULTS[key].value


def preset_vocab(preset: str | None) -> int:
    """The padded vocabulary of model *preset* (0 where it has none, or for no preset)."""
    return PRESET_VOCAB.get(preset or "", 0)


def model_vocab(model: str | ModelConfig, preset: str | None = None) -> int:
    """The vocabulary a job of *model* defaults to: a preset's name gives the preset's
    (:func:`preset_vocab`); a ModelConfig its own ``vocab`` where given, else that of
    *preset* (the preset it was made from, e.g. a scenario's ``model: {preset: ..., ...}``),
    else 0 (a ModelConfig alone has no preset, so a preset's ModelConfig has none)."""
    if isinstance(model, str):
        return preset_vocab(model)
    return model.vocab or preset_vocab(preset)
