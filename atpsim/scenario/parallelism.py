"""The scenario's ``parallelism``: how a step's GPUs are used (``devices``, ``meshes``,
``placement``, ``scheme``: :mod:`atpsim.scenario.schema`), or a whole training job's data x
pipeline x tensor-parallel layout (issue 12)::

    parallelism:
      devices: 1024              # as for a step; default: the topology's GPU count
      tp: {meshes: atp-opt, size: 8}   # TP meshes: all | atp-opt (every d1 x d2 of each
                                 #   size) | [d1, d2] / "d1xd2" (or a list; [8, 1] is
                                 #   Megatron-LM's 1D TP); `tp: [[8, 1], [4, 2]]` is short
                                 #   for `tp: {meshes: ...}`; size (int or list) default 8
      pp: [1, 8]                 # pipeline stages (int or list)
      dp: auto                   # auto = devices / (tp·cp·pp) | int or list
      cp: 1                      # context parallelism: each sequence over cp ranks, the
                                 #   attention a ring (int or list; 2·cp divides model.seq)
      ep: 1                      # expert-parallel replicas out of dp (int or list; a mixture
                                 #   of experts only: it divides dp and model.experts)
      micro_batch: 1             # samples per micro-batch (int or list)
      global_batch: 1536         # samples per iteration (int or list); required
      schedule: 1f1b             # gpipe | 1f1b | interleaved (= interleaved-1f1b), or a list
      virtual_stages: 1          # model chunks per stage (interleaved only; int or list)
      partition: even            # layers per stage: even (a divisor of the layers) | auto
                                 #   (balance the stages' compute, embedding and LM head
                                 #   counted) | [n1, ..., np] (one count per stage); or a
                                 #   list of these, e.g. [even, auto]
      sequence_parallel: true    # Megatron-LM's (1D TP only: a 2D mesh runs without);
                                 #   default [true, false]: each 1D layout both ways
      recompute: selective       # none | selective | full (or a list); default selective
      zero: 1                    # ZeRO stage 0 | 1 (or a list); default 1
      offload_activations: false # stored activations to host memory after each forward,
                                 #   back before the backward, over PCIe (or [false, true])
                                 # (defaults: atpsim.training.defaults, Megatron-LM's)
      vocab: 51200               # optional; default: the model preset's (GPT presets), else 0
      order: [tp, pp, dp]        # layout dimensions, innermost first (cp after tp unless
                                 #   named: [tp, cp, pp, dp])
      network: joint             # joint (every call in flight shares the links, issue 13) |
                                 #   isolated (each call alone); or a list
      perturb: {seed: 1, stragglers: 1, straggler_factor: 1.2}   # optional, or a list (an
                                 #   empty mapping {} is the unperturbed job): slow GPUs
                                 #   (stragglers, straggler_factor, gpus: [[rank, factor]])
                                 #   and slow NIC ports (slow_nics, nic_factor) or cables
                                 #   (links: [[node, node, factor]]), drawn with the seed
      neighbour: {model: gpt3-1.3b, tp: [8, 1], pp: 1, dp: 3, global_batch: 48}
                                 # optional: a second job on the next GPUs of the same
                                 #   fabric, simulated with each point (its slowdown and the
                                 #   point's against running alone)

Any of ``tp``, ``pp``, ``dp``, ``global_batch`` (or another key above) makes the scenario a
job scenario: its points are :class:`~atpsim.scenario.job_point.JobPoint` and its table the
job schema (:data:`atpsim.results.schema.JOB_SCHEMA`). The sizes are checked against the devices, the
model's layers and the batch when the sweep is expanded (:mod:`atpsim.scenario.job_sweep`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, model_validator

from atpsim.engine.methods import names as method_names
from atpsim.errors import did_you_mean
from atpsim.parallel import pipeline
from atpsim.parallel.partition import EVEN, PARTITIONS
from atpsim.scenario.entries import MeshChoice, mesh_choice, meshes_value
from atpsim.scenario.fields import (
    Frozen,
    OneOrMore,
    Placement,
    PositiveInt,
    Scheme,
    Str,
    as_tuple,
    invalid,
    show,
)
from atpsim.scenario.workload import JOB, STEP, Workload
from atpsim.training.defaults import SEARCH_SEQUENCE_PARALLEL, job_default

#: The keys of ``parallelism`` only a job scenario has.
JOB_KEYS = (
    "tp", "pp", "dp", "cp", "ep", "micro_batch", "global_batch", "schedule", "virtual_stages",
    "sequence_parallel", "recompute", "zero", "vocab", "order", "network", "perturb", "neighbour",
    "partition", "offload_activations",
)  # fmt: skip
#: How a job's calls share the network (the ``network`` methods of :mod:`atpsim.engine.methods`).
NETWORKS = tuple(method_names("network"))
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1)
LAYOUT_DIMENSIONS = ("tp", "pp", "dp")
#: An order may also name context parallelism's place (else it comes right after tp).
CONTEXT_ORDER = ("tp", "cp", "pp", "dp")
#: Schedule names a scenario may write for the pipeline layer's (``interleaved-1f1b``).
SCHEDULE_ALIASES = {"interleaved": "interleaved-1f1b"}
#: Megatron-LM's TP group: one 8-GPU node (Narayanan et al. 2021, Takeaway #1: tensor
#: parallelism up to the GPUs of a server).
DEFAULT_TP_SIZE = 8


def schedule_names() -> list[str]:
    """The pipeline schedules a scenario may name (the pipeline layer's and their aliases)."""
    return sorted({*pipeline.schedule_names(), *SCHEDULE_ALIASES})


def _schedule(value: str) -> str:
    names = schedule_names()
    if value not in names:
        raise invalid(f"unknown schedule {value!r}{did_you_mean(value, names)}")
    return SCHEDULE_ALIASES.get(value, value)


def _recompute(value: str) -> str:
    if value not in RECOMPUTE:
        raise invalid(f"expected one of {', '.join(RECOMPUTE)}, got {show(value)}")
    return value


def _zero(value: int) -> int:
    if value not in ZERO_STAGES:
        raise invalid(f"expected ZeRO stage 0 or 1, got {show(value)}")
    return value


def _dp(value: Any) -> Any:
    """``auto`` (None: devices / (tp·cp·pp)) or one or more replica counts."""
    return None if value == "auto" else as_tuple(value)


def _partitions(value: Any) -> Any:
    """``partition``: one partition (``auto``, or one list of counts ``[5, 6, 6, 5]``, checked
    here so an error names the key) or a list of them (``[even, auto, [5, 6, 6, 5]]``)."""
    if isinstance(value, (list, tuple)) and value and not any(isinstance(v, (str, list, tuple)) for v in value):
        return (_partition(tuple(value)),)
    return as_tuple(value)


def _partition(value: Any) -> Any:
    """``even``, ``auto`` or layer counts (whole numbers >= 0), as a tuple."""
    if isinstance(value, str):
        if value not in PARTITIONS:
            raise invalid(f"expected even, auto or a list of layer counts, got {show(value)}"
                          f"{did_you_mean(value, list(PARTITIONS))}")  # fmt: skip
        return value
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):  # fmt: skip
        return tuple(value)
    shown = list(value) if isinstance(value, tuple) else value
    raise invalid(f"expected even, auto or a list of whole layer counts >= 0, got {show(shown)}")


def _network(value: str) -> str:
    if value not in NETWORKS:
        raise invalid(f"expected one of {', '.join(NETWORKS)}, got {show(value)}")
    return value


def _once_each(gpus: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
    """``perturb.gpus`` with each rank once (a rank listed twice had its factors multiplied)."""
    ranks = [rank for rank, _ in gpus]
    twice = next((r for k, r in enumerate(ranks) if r in ranks[:k]), None)
    if twice is not None:
        raise invalid(f"rank {twice} listed twice; expected each rank once, with its one factor",
                      (ranks.index(twice, ranks.index(twice) + 1),))  # fmt: skip
    return gpus


class Perturb(Frozen):
    """``parallelism.perturb``: slow GPUs and links of a job (:func:`atpsim.training.
    perturb.draw_perturbation`), drawn with *seed*."""

    seed: Annotated[int, Field(strict=True, ge=0)] = 0
    stragglers: Annotated[int, Field(strict=True, ge=0)] = 0
    straggler_factor: Annotated[float, Field(gt=0)] = 1.0
    slow_nics: Annotated[int, Field(strict=True, ge=0)] = 0
    nic_factor: Annotated[float, Field(gt=0)] = 1.0
    gpus: Annotated[tuple[tuple[Annotated[int, Field(strict=True, ge=0)], Annotated[float, Field(gt=0)]], ...],
                    AfterValidator(_once_each)] = ()
    links: tuple[tuple[str, str, Annotated[float, Field(gt=0)]], ...] = ()

    def canonical(self) -> tuple[tuple[str, Any], ...]:
        """The keys set away from their defaults, sorted (empty: unperturbed)."""
        defaults = Perturb()
        return tuple(sorted((k, getattr(self, k)) for k in type(self).model_fields
                            if getattr(self, k) != getattr(defaults, k)))  # fmt: skip


def _perturbs(value: Any) -> Any:
    """One mapping or a non-empty list of them (an empty list made no point, then an empty
    table failed; ``{}`` is the unperturbed job)."""
    if isinstance(value, (list, tuple)) and not value:
        raise invalid("expected a perturbation or a list of them, got an empty list "
                      "({} is the job unperturbed)")  # fmt: skip
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _order(value: Any) -> Any:
    names = sorted(map(str, value)) if isinstance(value, (list, tuple)) else None
    if names not in (sorted(LAYOUT_DIMENSIONS), sorted(CONTEXT_ORDER)):
        raise invalid(f"expected a permutation of [tp, pp, dp] or of [tp, cp, pp, dp], got {show(value)}")
    return tuple(value)


def _tp(value: Any) -> Any:
    """``tp: [[8, 1], atp-opt]`` is short for ``tp: {meshes: [[8, 1], atp-opt]}``."""
    return value if isinstance(value, dict) else {"meshes": value}


def _mesh(value: Any) -> MeshChoice:
    return mesh_choice(value)


def _tp_choice(value: Any) -> MeshChoice:
    choice = mesh_choice(value)
    if choice.kind == "atp":
        raise invalid(f"a job's TP mesh is [d1, d2], 'D1xD2', 'atp-opt' or 'all', not {choice}")
    return choice


class TpChoice(Frozen):
    """``parallelism.tp``: the TP meshes of a job. A listed mesh ``[d1, d2]`` is one point;
    ``all`` and ``atp-opt`` are every factorization d1 x d2 of each *size* whose d1 and d2
    divide the hidden size (ATP-OPT is then the best of them in the report)."""

    meshes: Annotated[
        tuple[Annotated[MeshChoice, PlainValidator(_tp_choice)], ...],
        BeforeValidator(meshes_value),
    ] = (MeshChoice("all"),)
    size: OneOrMore[PositiveInt] = (DEFAULT_TP_SIZE,)


TpField = Annotated[TpChoice, BeforeValidator(_tp)]
DpField = Annotated[tuple[PositiveInt, ...] | None, BeforeValidator(_dp)]
Schedule = Annotated[Str, AfterValidator(_schedule)]
Recompute = Annotated[Str, AfterValidator(_recompute)]
Zero = Annotated[int, Field(strict=True), AfterValidator(_zero)]
StrictBool = Annotated[bool, Field(strict=True)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
Order = Annotated[tuple[str, ...], BeforeValidator(_order)]
Network = Annotated[Str, AfterValidator(_network)]
PartitionField = Annotated[tuple[Annotated[Any, PlainValidator(_partition)], ...], BeforeValidator(_partitions)]


class Neighbour(Frozen):
    """``parallelism.neighbour``: a second training job placed on the GPUs after the point's
    (:func:`atpsim.training.fabric.simulate_jobs`)."""

    model: Str
    tp: tuple[Annotated[int, Field(strict=True, ge=1)], Annotated[int, Field(strict=True, ge=1)]] = (1, 1)
    pp: Annotated[int, Field(strict=True, ge=1)] = 1
    dp: Annotated[int, Field(strict=True, ge=1)] = 1
    micro_batch: Annotated[int, Field(strict=True, ge=1)] = 1
    global_batch: Annotated[int, Field(strict=True, ge=1)] | None = None
    schedule: Schedule = job_default("schedule")
    zero: Zero = job_default("zero")
    recompute: Recompute = job_default("recompute")
    sequence_parallel: StrictBool | None = None  # the default: on for a 1D mesh (JobConfig)
    overlap_grad_reduce: StrictBool = True

    def canonical(self) -> tuple[tuple[str, Any], ...]:
        """Every key, sorted (tuples for lists)."""
        return tuple(sorted((k, getattr(self, k)) for k in type(self).model_fields))


class Parallelism(Frozen):
    """How the GPUs are used: device counts, meshes, the placement of meshes on GPUs, and the
    tensor-parallel *scheme* (``atp``; ``summa``: a mesh ``[q, q]`` is then the SUMMA grid,
    stacked ``devices / q²`` deep, ``all`` every such q; ``sagemaker``: the devices are one
    SageMaker-style TP group over data-parallel ranks, meshes do not apply). With any of :data:`JOB_KEYS`, a
    whole job's layout instead (see the module docstring): ``tp`` replaces ``meshes``, and
    ``global_batch`` is required."""

    devices: OneOrMore[PositiveInt] | None = None
    meshes: Annotated[
        tuple[Annotated[MeshChoice, PlainValidator(_mesh)], ...],
        BeforeValidator(meshes_value),
    ] = (MeshChoice("all"),)
    placement: OneOrMore[Placement] = ("row-major",)
    scheme: OneOrMore[Scheme] = ("atp",)
    tp: TpField = TpChoice()
    pp: OneOrMore[PositiveInt] = (1,)
    dp: DpField = None
    cp: OneOrMore[PositiveInt] = (1,)
    ep: OneOrMore[PositiveInt] = (1,)
    micro_batch: OneOrMore[PositiveInt] = (1,)
    global_batch: OneOrMore[PositiveInt] = ()
    schedule: OneOrMore[Schedule] = (job_default("schedule"),)
    virtual_stages: OneOrMore[PositiveInt] = (1,)
    sequence_parallel: OneOrMore[StrictBool] = SEARCH_SEQUENCE_PARALLEL
    recompute: OneOrMore[Recompute] = (job_default("recompute"),)
    zero: OneOrMore[Zero] = (job_default("zero"),)
    vocab: NonNegativeInt | None = None
    order: Order = LAYOUT_DIMENSIONS
    network: OneOrMore[Network] = ("joint",)
    perturb: Annotated[tuple[Perturb, ...], BeforeValidator(_perturbs)] = (Perturb(),)
    neighbour: Neighbour | None = None
    partition: PartitionField = (EVEN,)
    offload_activations: OneOrMore[StrictBool] = (False,)

    @property
    def workload(self) -> Workload:
        """``job`` where these keys describe a whole job (any of :data:`JOB_KEYS` set), else
        ``step``."""
        return JOB if self.model_fields_set & set(JOB_KEYS) else STEP

    @model_validator(mode="after")
    def _check_job(self) -> Parallelism:
        if self.workload != JOB:
            return self
        if not self.global_batch:
            raise invalid("missing required key (a job scenario needs its global batch)",
                          ("global_batch",))  # fmt: skip
        for key in ("meshes", "scheme"):
            if key in self.model_fields_set:
                message = f"a job scenario takes its TP meshes from 'tp'; remove '{key}'"
                raise invalid(message, (key,))
        return self
