"""A pipeline op's work: its TP pass programs (the layers', the embedding's and the LM head's,
the forward recomputed in backward) and what each costs.

Each stage's forward and backward of one micro-batch is its TP pass program
(:func:`~atpsim.parallel.atp.build_pass_program`, ``L / (p·v)`` layers, or the stage's own
count of an uneven partition: :attr:`~atpsim.training.config.JobConfig.stage_layers`)
simulated on every TP group of the job at once (all stages and replicas busy together, as in the pipeline's steady
state), so the op times hold the exposed TP communication; with a perturbation, a stage with
a slow GPU or a slow link of its own is simulated on its own TP groups, with each rank's
compute factor, on the links as they run. With a *vocab*, the embedding runs on the first
virtual stage and the LM head with the loss on the last (:mod:`atpsim.parallel.head`). With
context parallelism every program is one context-parallel rank's (its ``s/cp`` tokens; the
layers' attention a ring whose sends are timed with the TP collectives, every ring at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import Literal

import numpy as np

from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import check_model_dtype, compute_time_s
from atpsim.engine.step.job_ops import Part
from atpsim.engine.step.run import StepResult, layer_overhead_s, simulate_program
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_pass_program
from atpsim.parallel.context import CP_DIM
from atpsim.parallel.head import build_head_program
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import EP_DIM
from atpsim.parallel.pipeline import PipelineOp
from atpsim.program import StepProgram
from atpsim.topology.graph import Topology
from atpsim.training.calls import pass_groups
from atpsim.training.config import JobConfig
from atpsim.training.offload import chunk_offload_bytes, exposed_copy_s, host_link_Bps

#: Forward compute ops of the attention core, which selective recomputation runs again.
ATTENTION_CORE = ("attn_scores", "attn_softmax", "attn_dropout", "attn_context")


@dataclass(frozen=True)
class PassCost:
    """One op of a stage: its *time_s*, of which *compute_s* computing on the critical rank and
    *exposed_s* TP communication not hidden under compute (the rest: waiting for peers)."""

    time_s: float
    compute_s: float
    exposed_s: float
    #: Of *time_s*, activation copies to or from the host its compute did not hide
    #: (:mod:`atpsim.training.offload`).
    offload_s: float = 0.0

    @classmethod
    def of(cls, result: StepResult, with_overhead: bool = True) -> PassCost:
        time_s = result.step_time_s if with_overhead else result.timeline.step_time_s
        extra = result.step_time_s - result.timeline.step_time_s
        compute_s = result.compute_time_s - (0.0 if with_overhead else extra)
        return cls(time_s, compute_s, result.exposed_comm_s)

    def __add__(self, other: PassCost) -> PassCost:
        return PassCost(self.time_s + other.time_s, self.compute_s + other.compute_s,
                        self.exposed_s + other.exposed_s, self.offload_s + other.offload_s)  # fmt: skip


NO_COST = PassCost(0.0, 0.0, 0.0)
#: The parts of the model a pipeline op may hold, besides the layers.
ENDS = ("embedding", "head")


class AllTensorGroups:
    """Every TP group of the job as one mesh-like source of groups (all stages and replicas)."""

    def __init__(self, layout: ParallelLayout):
        self.layout = layout

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def ranks(self) -> list[int] | None:
        """The job's GPUs where they do not start at rank 0 (a job placed after another)."""
        first = getattr(self.layout, "offset", 0)
        return list(range(first, first + self.layout.size)) if first else None

    def groups(self, dim: int) -> list[list[int]]:
        """Every TP group of mesh dimension *dim*; for an MoE all-to-all (:data:`EP_DIM`) every
        expert-parallel group, for a ring attention send (:data:`CP_DIM`) every
        context-parallel group (:func:`~atpsim.training.calls.pass_groups`)."""
        return pass_groups(self.layout, dim)


class StageGroups:
    """The TP groups of one (replica, stage), in GPU ranks; its ranks in position order."""

    def __init__(self, layout: ParallelLayout, replica: int, stage: int):
        self.layout, self.replica, self.stage = layout, replica, stage

    @property
    def size(self) -> int:
        return self.layout.tp.size

    @property
    def ranks(self) -> list[int]:
        return self.layout.stage_ranks(self.replica, self.stage)

    def groups(self, dim: int) -> list[list[int]]:
        if dim == EP_DIM:  # its groups span replicas: a job with ep > 1 is not perturbed
            raise SimulationError("an expert-parallel all-to-all spans replicas; one stage of one "
                                  "replica cannot run it alone", key="ep")  # fmt: skip
        if dim == CP_DIM:  # likewise: a job with cp > 1 is not perturbed
            raise SimulationError("a ring attention send spans context-parallel ranks; one stage of "
                                  "one of them cannot run it alone", key="cp")  # fmt: skip
        return [[self.layout.rank(self.replica, self.stage, t) for t in g] for g in self.layout.tp.groups(dim)]


@dataclass(frozen=True)
class JobPrograms:
    """The TP programs of a job's ops: the layers' forward and backward of one micro-batch
    on each stage (one pair per distinct layer count), and the embedding's and head's forward
    and backward (None without vocab)."""

    config: JobConfig

    @cached_property
    def _by_count(self) -> dict[int, dict[str, StepProgram]]:
        return {}

    def layers_of(self, stage: int) -> dict[str, StepProgram] | None:
        """The forward ("F") and backward ("B") of *stage*'s model chunk
        (:meth:`~atpsim.training.config.JobConfig.stage_model`); None where it holds no layers."""
        if self.config.chunk_layers(stage) == 0:
            return None
        model = self.config.stage_model(stage)
        if model.layers not in self._by_count:
            self._by_count[model.layers] = self._build(model)
        return self._by_count[model.layers]

    def _build(self, model: ModelConfig) -> dict[str, StepProgram]:
        mesh = self.config.layout.tp
        if not isinstance(mesh, DeviceMesh):
            raise SimulationError("jobs run on ATP meshes (SUMMA grids: not yet)", key="tp")
        sp, ep, cp = self.config.sequence_parallel, self.config.layout.ep, self.config.layout.cp
        phases: tuple[tuple[str, Literal["fwd", "bwd"]], ...] = (("F", "fwd"), ("B", "bwd"))
        return {kind: build_pass_program(model, mesh, self.config.chunks, phase, sequence_parallel=sp, ep=ep, cp=cp)
                for kind, phase in phases}  # fmt: skip

    @cached_property
    def ends(self) -> dict[tuple[str, str], StepProgram] | None:
        mesh = self.config.layout.tp
        if self.config.vocab == 0 or not isinstance(mesh, DeviceMesh):
            return None
        model = context_share(self.config.chunk_model, self.config.layout.cp)
        return {(part, kind): build_head_program(self.config.vocab, model, mesh,
                                                 part, "fwd" if kind == "F" else "bwd")  # type: ignore[arg-type]
                for part in ENDS for kind in ("F", "B")}  # fmt: skip

    def all(self) -> list[StepProgram]:
        """Every program an op of the job runs: each stage's layers', then the ends'."""
        stages = [self.layers_of(s) for s in range(self.config.layout.pp)]
        layers = {id(p): p for pair in stages if pair is not None for p in pair.values()}
        return list(layers.values()) + list((self.ends or {}).values())

    def ends_of(self, stage: int, op: PipelineOp) -> list[str]:
        """The model's ends *op* on *stage* holds: the embedding on the first virtual stage,
        the head on the last."""
        k = op.virtual_stage(stage, self.config.layout.pp)
        last = self.config.shape.n_virtual_stages - 1
        return [part for part, here in (("embedding", k == 0), ("head", k == last)) if here and self.ends]


def context_share(model: ModelConfig, cp: int) -> ModelConfig:
    """*model* on one of *cp* context-parallel ranks for the token-parallel ends (the
    embedding and the LM head with the loss run on the rank's ``s/cp`` tokens)."""
    return model if cp == 1 else replace(model, seq=model.seq // cp)


class OpCosts:
    """``cost(stage, op)``: the layers' pass, recomputation in backward, the embedding on the
    first virtual stage and the LM head on the last, on *source*'s TP groups (default: every
    TP group of the job at once) with *scale* per rank of the source."""

    def __init__(self, topology: Topology, profile: HardwareProfile, programs: JobPrograms,
                 source: AllTensorGroups | StageGroups | None = None,
                 scale: np.ndarray | None = None):
        check_model_dtype(profile, programs.config.model)
        self.topology, self.profile, self.programs = topology, profile, programs
        self.config = programs.config
        self.source = source or AllTensorGroups(self.config.layout)
        self.scale = scale

    def _run(self, program: StepProgram, model: ModelConfig) -> StepResult:
        ranks = self.source.ranks
        return simulate_program(self.topology, self.profile, model, program,
                                self.source, self.config.algorithm, ranks=ranks,
                                rank_scale=self.scale)  # fmt: skip

    @cached_property
    def _by_count(self) -> dict[int, dict[str, PassCost]]:
        return {}

    def _layers(self, stage: int) -> dict[str, PassCost]:
        """The layers' forward and backward of *stage*, once per distinct layer count."""
        programs = self.programs.layers_of(stage)
        if programs is None:
            return {"F": NO_COST, "B": NO_COST}
        model = self.config.stage_model(stage)
        if model.layers not in self._by_count:
            forward = self._run(programs["F"], model)
            backward = self._run(programs["B"], model)
            passes = {"F": PassCost.of(forward), "B": PassCost.of(backward) + self._recompute(forward, stage)}
            self._by_count[model.layers] = {kind: cost + self._offload(stage, cost) for kind, cost in passes.items()}
        return self._by_count[model.layers]

    @cached_property
    def _host_Bps(self) -> float:
        """The job's GPUs' slowest host (PCIe) link, bytes/s per direction."""
        layout = self.config.layout
        first = getattr(layout, "offset", 0)
        return host_link_Bps(self.topology, range(first, first + layout.size))

    def _offload(self, stage: int, cost: PassCost) -> PassCost:
        """What activation offloading adds to a pass of *stage* costing *cost*: the copy of its
        chunk's stored activations to (forward) or from (backward) the host beyond the pass's
        compute (:func:`~atpsim.training.offload.exposed_copy_s`); nothing where it is off."""
        if not self.config.offload_activations:
            return NO_COST
        seconds = exposed_copy_s(chunk_offload_bytes(self.config, stage), self._host_Bps, cost.compute_s)
        return PassCost(seconds, 0.0, 0.0, seconds)

    def offload_s(self, stage: int, kind: str) -> float:
        """The exposed host copy of *stage*'s layers' forward (``F``) or backward (``B``), s."""
        return self._layers(stage)[kind].offload_s

    @cached_property
    def _ends(self) -> dict[tuple[str, str], PassCost]:
        return {key: PassCost.of(self._run(program, self.config.chunk_model), with_overhead=False)  # not a layer
                for key, program in (self.programs.ends or {}).items()}  # fmt: skip

    def _recompute(self, forward: StepResult, stage: int) -> PassCost:
        """What recomputation adds to each backward of *stage*: the whole forward (full) or
        the attention core's forward compute (selective)."""
        if self.config.recompute == "full":
            return PassCost.of(forward)
        if self.config.recompute == "none":
            return NO_COST
        seconds = selective_recompute_s(self.profile, self.config, self.programs, stage) * self._slowest()
        return PassCost(seconds, seconds, 0.0)

    def _slowest(self) -> float:
        return float(self.scale.max()) if self.scale is not None else 1.0

    def __call__(self, stage: int, op: PipelineOp) -> PassCost:
        total = self._layers(stage)[op.kind]
        for part in self.programs.ends_of(stage, op):
            total = total + self._ends[(part, op.kind)]
        return total


def selective_recompute_s(profile: HardwareProfile, config: JobConfig, programs: JobPrograms,
                          stage: int = 0) -> float:
    """The attention core's forward compute of *stage*'s layers, run again in each of its
    backwards (s)."""
    layers = programs.layers_of(stage)
    if layers is None:
        return 0.0
    ops = layers["F"].compute_ops()
    core = [op for op in ops if op.name.split(".")[-1] in ATTENTION_CORE]
    return float(sum(compute_time_s(op, profile, config.model.dtype) for op in core))


def op_parts(profile: HardwareProfile, programs: JobPrograms,
             offload: Callable[[int, str], float] | None = None) -> Callable[[int, PipelineOp], Sequence[Part]]:
    """``parts(stage, op)``: the op's programs in the order they run (the embedding first and
    the head last in forward; the reverse in backward, with the recomputation before the
    layers' backward), each layer pass followed by the profile's per-layer overhead; with
    *offload* (``offload(stage, kind)``: an activation copy's exposed seconds), a delay of it
    after the layers."""
    config = programs.config

    @cache
    def body(stage: int, kind: str) -> list[Part]:
        layers = programs.layers_of(stage)
        if layers is None:
            return []
        overhead = config.stage_model(stage).layers * layer_overhead_s(profile)
        copy = [Part(None, offload(stage, kind))] if offload is not None and config.offload_activations else []
        if kind == "F":
            return [Part(layers["F"], overhead)] + copy
        recompute = {"none": [], "full": [Part(layers["F"], overhead)],
                     "selective": [Part(None, selective_recompute_s(profile, config, programs, stage))]}
        return recompute[config.recompute] + [Part(layers["B"], overhead)] + copy

    def parts(stage: int, op: PipelineOp) -> list[Part]:
        ends = programs.ends_of(stage, op)
        before = [Part(programs.ends[(p, op.kind)]) for p in ends if p == ("embedding" if op.kind == "F" else "head")]  # type: ignore[index]
        after = [Part(programs.ends[(p, op.kind)]) for p in ends if p == ("head" if op.kind == "F" else "embedding")]  # type: ignore[index]
        return before + body(stage, op.kind) + after

    return parts
