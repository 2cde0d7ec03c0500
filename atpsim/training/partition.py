"""``partition: auto`` made concrete: the layer counts that balance a job's pipeline stages,
from the job model's own compute times.

A stage's cost is what its ops compute for one micro-batch, forward and backward: each of its
layers (the TP pass program of one layer, :func:`~atpsim.parallel.atp.build_pass_program`, its
compute ops timed by the GEMM model, :func:`~atpsim.compute.timing.compute_time_s`, with the
recomputation the job asks for and the profile's per-layer overhead, as
:mod:`atpsim.training.passes` runs them) and, on the first stage, the embedding, on the last
the LM head with the loss (:func:`~atpsim.parallel.head.build_head_program`; 0 without a
vocabulary). :func:`~atpsim.parallel.partition.balanced_layers` splits the layers to minimise
the largest stage cost. TP communication is left out: it grows with the layers alike, and
the ends' is small beside their GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from atpsim.compute.hardware import HardwareProfile
from atpsim.engine.step.run import compute_timer, layer_overhead_s
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_pass_program
from atpsim.parallel.head import build_head_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.partition import AUTO, balanced_layers, check_partition, end_costs, stage_costs
from atpsim.program import StepProgram
from atpsim.training.config import JobConfig
from atpsim.training.passes import ATTENTION_CORE


@dataclass(frozen=True)
class StageCosts:
    """What :func:`partition_costs` finds: one layer's forward + backward (*layer_s*), the
    embedding's (*first_s*) and the LM head's with the loss (*last_s*), each on one rank for
    one micro-batch (s)."""

    layer_s: float
    first_s: float
    last_s: float

    def of(self, counts: tuple[int, ...]) -> tuple[float, ...]:
        """Each stage's cost when the stages hold *counts* layers (s)."""
        return stage_costs(counts, self.layer_s, end_costs(len(counts), self.first_s, self.last_s))


def resolve_partition(config: JobConfig, profile: HardwareProfile) -> JobConfig:
    """*config* with ``partition: auto`` replaced by the balanced layer counts on *profile*
    (:func:`balanced_partition`); any other partition as given."""
    if config.partition != AUTO:
        return config
    return replace(config, partition=balanced_partition(config, profile))


def balanced_partition(config: JobConfig, profile: HardwareProfile) -> tuple[int, ...]:
    """The layers per stage that minimise the largest stage cost (:func:`partition_costs`,
    :func:`~atpsim.parallel.partition.balanced_layers`)."""
    layout = config.layout
    check_partition(AUTO, config.model.layers, layout.pp, config.virtual_stages)
    costs = partition_costs(config, profile)
    # A mixture of experts is split in whole groups of moe_every layers, so that every stage
    # holds its MoE layers at the same places (layers 0, k, 2k, ... of each chunk).
    group = config.model.moe_every if config.model.is_moe else 1
    groups = balanced_layers(config.model.layers // group, costs.layer_s * group,
                             end_costs(layout.pp, costs.first_s, costs.last_s))  # fmt: skip
    return tuple(count * group for count in groups)


def partition_costs(config: JobConfig, profile: HardwareProfile) -> StageCosts:
    """One layer's and the two ends' compute for one micro-batch on one rank of *config*'s
    TP mesh, forward and backward (module docstring)."""
    mesh = config.layout.tp
    if not isinstance(mesh, DeviceMesh):
        raise SimulationError("jobs run on ATP meshes (SUMMA grids: not yet)", key="tp")
    timer = compute_timer(profile, config.model.dtype)

    def seconds(program: StepProgram) -> float:
        return sum(timer(op) for op in program.compute_ops())

    one = replace(config.model, layers=1, batch=config.micro_batch)
    forward, backward = (build_pass_program(one, mesh, config.chunks, phase,
                                            sequence_parallel=config.sequence_parallel)
                         for phase in ("fwd", "bwd"))  # fmt: skip
    overhead = layer_overhead_s(profile)
    layer_s = seconds(forward) + seconds(backward) + 2 * overhead + _recompute_s(config, forward, timer, overhead)
    if config.vocab == 0:
        return StageCosts(layer_s, 0.0, 0.0)
    ends = {part: sum(seconds(build_head_program(config.vocab, one, mesh, part, phase))  # type: ignore[arg-type]
                      for phase in ("fwd", "bwd"))
            for part in ("embedding", "head")}  # fmt: skip
    return StageCosts(layer_s, ends["embedding"], ends["head"])


def _recompute_s(config: JobConfig, forward: StepProgram, timer, overhead_s: float) -> float:
    """What recomputation adds to one layer's backward: its forward again (full) or its
    attention core's forward compute (selective)."""
    if config.recompute == "full":
        return sum(timer(op) for op in forward.compute_ops()) + overhead_s
    if config.recompute == "selective":
        return sum(timer(op) for op in forward.compute_ops() if op.name.split(".")[-1] in ATTENTION_CORE)
    return 0.0
