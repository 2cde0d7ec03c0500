"""What a job is: :class:`JobConfig` (the model, the DP x PP x TP layout, how the layers split
over the stages and how the step is cut) and :func:`check_job` (its sizes divide)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import SimulationError, SizeLimitError
from atpsim.parallel.context import check_context
from atpsim.parallel.job_memory import check_slots
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import check_experts
from atpsim.parallel.partition import (
    AUTO,
    EVEN,
    Partition,
    as_partition,
    check_partition,
    stage_layers,
)
from atpsim.parallel.pipeline import PipelineShape
from atpsim.training.defaults import job_default, model_vocab
from atpsim.training.offload import check_offload

#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``, torch.nn.parallel docs), bytes.
DEFAULT_BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class JobConfig:
    """What :func:`simulate_job` runs: the model, the layout and how the step is cut."""

    model: ModelConfig
    layout: ParallelLayout
    micro_batch: int
    global_batch: int
    schedule: str = job_default("schedule")
    virtual_stages: int = 1
    chunks: int = 1
    algorithm: str = "auto"
    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    overlap_grad_reduce: bool = True
    zero: int = job_default("zero")
    recompute: str = job_default("recompute")
    sequence_parallel: bool = None  # type: ignore[assignment]  # None: the default, resolved below
    vocab: int = 0
    #: ``even``, ``auto`` or one layer count per stage (:mod:`atpsim.parallel.partition`).
    partition: Partition = EVEN
    #: Stored activations to host memory after each forward, back before the backward
    #: (:mod:`atpsim.training.offload`); off by default.
    offload_activations: bool = False

    def __post_init__(self) -> None:
        # None is the default: on where the TP mesh is 1D (atpsim.training.defaults); asked
        # for on a 2D mesh, it is refused when the job is checked.
        object.__setattr__(self, "sequence_parallel",
                           resolved_sequence_parallel(self.sequence_parallel, self.layout.tp, self.model.seq))
        object.__setattr__(self, "partition", as_partition(self.partition))
        object.__setattr__(self, "vocab", padded_vocab(self.vocab, self.layout.tp.size))

    @property
    def n_microbatches(self) -> int:
        return self.global_batch // (self.micro_batch * self.layout.dp)

    @property
    def shape(self) -> PipelineShape:
        return PipelineShape(self.layout.pp, self.n_microbatches, self.virtual_stages)

    @cached_property
    def chunk_model(self) -> ModelConfig:
        """One model chunk of a stage for one micro-batch (an even split's; a stage's own:
        :meth:`stage_model`); kept: a job graph asks for it per op."""
        layers = self.model.layers // (self.layout.pp * self.virtual_stages)
        return replace(self.model, layers=layers, batch=self.micro_batch)

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """The layers each pipeline stage holds, all its model chunks together: ``L / p``
        each (``even``) or the partition's counts (``auto`` once resolved:
        :func:`atpsim.training.partition.resolve_partition`)."""
        return stage_layers(self.partition, self.model.layers, self.layout.pp)

    def chunk_layers(self, stage: int) -> int:
        """Layers of one model chunk of *stage* (its layers over the virtual stages; 0 for a
        stage an explicit partition leaves empty)."""
        return self.stage_layers[stage] // self.virtual_stages

    def stage_model(self, stage: int) -> ModelConfig:
        """One model chunk of *stage* for one micro-batch (an even split's :attr:`chunk_model`
        where the partition is ``even``); a stage without layers has none
        (:meth:`chunk_layers` is 0): a SimulationError."""
        if self.partition == EVEN:
            return self.chunk_model
        layers = self.chunk_layers(stage)
        if layers == 0:
            raise SimulationError(f"pipeline stage {stage} holds no layers (partition "
                                  f"{list(self.stage_layers)})", key="partition")  # fmt: skip
        return replace(self.model, layers=layers, batch=self.micro_batch)



#: Megatron-LM pads the vocabulary to a multiple of this times the TP size
#: (``--make-vocab-size-divisible-by``, default 128), so the embedding and LM head split evenly.
VOCAB_PAD_MULTIPLE = 128


def padded_vocab(vocab: int, tp_size: int) -> int:
    """*vocab* tokens padded as Megatron-LM pads them for *tp_size* TP ranks: up to a multiple
    of 128 x tp_size (GPT-2's 50,257 -> 51,200 at TP 8; Llama 3's 128,256 -> 129,024 at TP 8;
    an already padded 51,200 stays). 0 (no embedding) and negative values pass unchanged."""
    if vocab <= 0:
        return vocab
    multiple = VOCAB_PAD_MULTIPLE * tp_size
    return -(-vocab // multiple) * multiple


def runs_sequence_parallel(mesh: object, seq: int | None = None) -> bool:
    """Whether a TP *mesh* can run Megatron-LM's sequence parallelism: a 1D DeviceMesh (t, 1)
    of t > 1 ranks (over one rank it changes nothing) that splits a sequence of *seq* tokens
    evenly, where given (Megatron-LM requires it)."""
    if not (isinstance(mesh, DeviceMesh) and mesh.d2 == 1 and mesh.d1 > 1):
        return False
    return seq is None or seq % mesh.d1 == 0


def job_config(model: str | ModelConfig, layout: ParallelLayout, micro_batch: int,
               global_batch: int, **options: object) -> JobConfig:
    """The JobConfig of *model* (a preset's name or a ModelConfig) on *layout*, its *options*
    the JobConfig fields given; a vocabulary not given (or None) is the preset's, or a
    ModelConfig's own ``vocab`` (:func:`~atpsim.training.defaults.model_vocab`: 0 for a
    ModelConfig that gives none, a preset's included). Unchecked
    (:func:`check_job`). One constructor for :func:`atpsim.simulate_job` and
    :func:`atpsim.simulate_jobs`, so the same job is the same config in both."""
    if options.get("vocab") is None:
        options["vocab"] = model_vocab(model)
    config_model = model if isinstance(model, ModelConfig) else model_preset(model)
    return JobConfig(config_model, layout, micro_batch, global_batch, **options)  # type: ignore[arg-type]


def resolved_sequence_parallel(asked: bool | None, mesh: object, seq: int | None = None) -> bool:
    """Sequence parallelism as *asked*, or where None (the default) the default setting
    (:data:`~atpsim.training.defaults.JOB_DEFAULTS`) on a 1D TP *mesh* and off on a 2D one."""
    if asked is None:
        return bool(job_default("sequence_parallel")) and runs_sequence_parallel(mesh, seq)
    return asked


def check_job(config: JobConfig) -> None:
    """Divisibility of the batch and the layers (or the partition's counts), and the iteration's size (a SizeLimitError,
    which a search does not prune as indivisible, past :data:`~atpsim.parallel.job_memory.
    DEFAULT_MAX_SLOTS` stage x micro-batch slots); one line naming the key, else."""
    per_step = config.micro_batch * config.layout.dp
    if config.micro_batch < 1 or config.global_batch % per_step:
        raise SimulationError(f"global_batch {config.global_batch} is not a multiple of micro_batch "
                              f"x dp = {per_step}", key="global_batch")  # fmt: skip
    check_partition(config.partition, config.model.layers, config.layout.pp, config.virtual_stages)
    too_large = check_slots(config.layout.pp, config.virtual_stages, config.global_batch, config.micro_batch)
    if too_large:
        raise SizeLimitError(too_large, key="global_batch")
    if config.zero not in (0, 1):
        raise SimulationError(f"expected zero 0 or 1, got {config.zero}", key="zero")
    if config.vocab < 0:
        raise SimulationError(f"expected a vocabulary of 0 or more tokens, got {config.vocab}", key="vocab")
    if config.recompute not in ("none", "selective", "full"):
        raise SimulationError(f"expected recompute none, selective or full, got {config.recompute!r}",
                              key="recompute")  # fmt: skip
    mesh = config.layout.tp
    if config.sequence_parallel and isinstance(mesh, DeviceMesh) and mesh.d2 != 1:
        raise SimulationError(f"sequence parallelism is for 1D TP (DeviceMesh(t, 1)), not {mesh}",
                              key="sequence_parallel")  # fmt: skip
    check_expert_layers(config)
    check_context(config.model.seq, config.layout.cp)
    check_offload(config.offload_activations)


def check_expert_layers(config: JobConfig) -> None:
    """A mixture-of-experts job's sizes: ``ep`` on a dense model or not dividing the experts
    is refused (key ``ep``: :func:`~atpsim.parallel.moe.check_experts`), and every model chunk
    holds the same MoE layers (``moe_every`` divides each chunk's layers; key
    ``model.moe_every``)."""
    model = config.model
    check_experts(model, config.layout.ep)
    if not model.is_moe or model.moe_every == 1:
        return
    if config.partition == AUTO:  # balanced in whole groups of moe_every layers (training.partition)
        if model.layers % model.moe_every:
            raise SimulationError(f"model.moe_every {model.moe_every} does not divide the "
                                  f"{model.layers} layers", key="model.moe_every")  # fmt: skip
        return
    for stage in range(config.layout.pp):
        layers = config.chunk_layers(stage)
        if layers % model.moe_every:
            raise SimulationError(f"model.moe_every {model.moe_every} does not divide the {layers} "
                                  f"layers of stage {stage}'s model chunks: each chunk's layers 0, k, "
                                  "2k, ... are its MoE layers", key="model.moe_every")  # fmt: skip
