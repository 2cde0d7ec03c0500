"""Tensor-parallel schemes registered by name: the plans a scenario's ``scheme`` selects.

A scheme is a way to split a transformer layer over GPUs, and each registers its name
(``point.scheme``), the type of its plan (what a sweep point's ``tp`` holds), the builder of
one rank's step program from ``(model, plan, chunks)`` and how ATP's memory formula
(:mod:`atpsim.parallel.memory`) sees one of its ranks:

- ``atp``: ATP on a :class:`~atpsim.parallel.mesh.DeviceMesh` (d1, d2), Megatron-LM's 1D
  layer when d2 = 1 (:mod:`atpsim.parallel.atp`);
- ``summa``: 2D / 2.5D tensor parallelism of SUMMA products on a
  :class:`~atpsim.parallel.grid.Grid` (q, depth) (:mod:`atpsim.parallel.summa`);
- ``sagemaker``: SageMaker-style tensor parallelism over a
  :class:`~atpsim.parallel.sagemaker.SageMakerGroup` of data-parallel ranks
  (:mod:`atpsim.parallel.sagemaker`).

The engine times any of them through one function
(:func:`atpsim.engine.step.run.simulate_des_step`) and :func:`~atpsim.parallel.memory.memory_per_rank`
estimates any of them, so a new scheme is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError, did_you_mean
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import SageMakerGroup, build_sagemaker_program, local_model
from atpsim.parallel.summa import build_summa_program
from atpsim.program import StepProgram

SchemeName = Literal["atp", "summa", "sagemaker"]
#: A scheme's plan: the ranks and how the layer splits over them (a sweep point's ``tp``).
TPPlan = DeviceMesh | Grid | SageMakerGroup


@dataclass(frozen=True)
class MemoryView:
    """One rank of a scheme as ATP's memory formula estimates it: its weights split as on
    *weights_mesh*, and it keeps the activations of *activation_model* split as on
    *activation_mesh*."""

    weights_mesh: DeviceMesh
    activation_model: ModelConfig
    activation_mesh: DeviceMesh


@dataclass(frozen=True)
class TPScheme:
    """One tensor-parallel scheme: its *name*, the type of its plan, *build_program*,
    ``(model, plan, chunks) -> StepProgram`` for one rank (every rank runs the same, SPMD), and
    *memory_view*, ``(model, plan) -> MemoryView``."""

    name: SchemeName
    plan_type: type
    build_program: Callable[[ModelConfig, Any, int], StepProgram]
    memory_view: Callable[[ModelConfig, Any], MemoryView]


def _atp_program(model: ModelConfig, mesh: DeviceMesh, chunks: int) -> StepProgram:
    return build_step_program(model, mesh, chunks)


def _summa_program(model: ModelConfig, grid: Grid, chunks: int) -> StepProgram:
    return build_summa_program(model, grid.q, grid.depth, chunks)


def _sagemaker_program(model: ModelConfig, group: SageMakerGroup, chunks: int) -> StepProgram:
    return build_sagemaker_program(model, group.t, chunks)


def _atp_memory(model: ModelConfig, mesh: DeviceMesh) -> MemoryView:
    return MemoryView(mesh, model, mesh)


def _summa_memory(model: ModelConfig, grid: Grid) -> MemoryView:
    """One layer of the grid, ``DeviceMesh(q, q)``: exact for the weights (q² blocks,
    replicated over depth), an upper bound for the activations (SUMMA also splits the rows
    over q·depth)."""
    return MemoryView(grid.layer_mesh(), model, grid.layer_mesh())


def _sagemaker_memory(model: ModelConfig, group: SageMakerGroup) -> MemoryView:
    """The linears' weights split as on DeviceMesh(t, 1); the activations of the rank's own
    ``batch / t`` samples as on one GPU (the gathered linear inputs of the whole group are
    transient and left out)."""
    return MemoryView(group.mesh(), local_model(model, group.t), DeviceMesh(1, 1))


_SCHEMES: dict[str, TPScheme] = {
    scheme.name: scheme
    for scheme in (
        TPScheme("atp", DeviceMesh, _atp_program, _atp_memory),
        TPScheme("summa", Grid, _summa_program, _summa_memory),
        TPScheme("sagemaker", SageMakerGroup, _sagemaker_program, _sagemaker_memory),
    )
}


def scheme_names() -> tuple[str, ...]:
    """The registered schemes' names, in registration order."""
    return tuple(_SCHEMES)


def get_scheme(name: str) -> TPScheme:
    """The scheme called *name*; an unknown name raises :class:`SimulationError` naming the
    nearest registered one."""
    if name not in _SCHEMES:
        raise SimulationError(f"unknown tensor-parallel scheme {name!r}"
                              f"{did_you_mean(name, _SCHEMES)}", key="scheme")  # fmt: skip
    return _SCHEMES[name]


def scheme_of(tp: TPPlan) -> TPScheme:
    """The scheme whose plan *tp* is (a DeviceMesh is ATP's, a Grid SUMMA's, ...)."""
    for scheme in _SCHEMES.values():
        if isinstance(tp, scheme.plan_type):
            return scheme
    raise SimulationError(f"{tp!r} is the plan of no tensor-parallel scheme; expected one of "
                          f"{[s.plan_type.__name__ for s in _SCHEMES.values()]}")  # fmt: skip


def build_tp_program(model: ModelConfig, tp: TPPlan, chunks: int) -> StepProgram:
    """One rank's step program of *model* on *tp* with the batch in *chunks*, built by the
    scheme whose plan *tp* is."""
    return scheme_of(tp).build_program(model, tp, chunks)
