"""Tensor-parallel schemes registered by name: the plans a scenario's ``scheme`` selects.

A scheme is a way to split a transformer layer over GPUs, and each registers three things: its
name (``point.scheme``), the type of its plan (what a sweep point's ``tp`` holds) and the
builder of one rank's step program from ``(model, plan, chunks)``:

- ``atp``: ATP on a :class:`~atpsim.parallel.mesh.DeviceMesh` (d1, d2), Megatron-LM's 1D
  layer when d2 = 1 (:mod:`atpsim.parallel.atp`);
- ``summa``: 2D / 2.5D tensor parallelism of SUMMA products on a
  :class:`~atpsim.parallel.grid.Grid` (q, depth) (:mod:`atpsim.parallel.summa`);
- ``sagemaker``: SageMaker-style tensor parallelism over a
  :class:`~atpsim.parallel.sagemaker.SageMakerGroup` of data-parallel ranks
  (:mod:`atpsim.parallel.sagemaker`).

The engine times any of them through one function
(:func:`atpsim.engine.step.run.simulate_des_step`), so a new scheme is one entry here.
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
from atpsim.parallel.sagemaker import SageMakerGroup, build_sagemaker_program
from atpsim.parallel.summa import build_summa_program
from atpsim.program import StepProgram

SchemeName = Literal["atp", "summa", "sagemaker"]
#: A scheme's plan: the ranks and how the layer splits over them (a sweep point's ``tp``).
TPPlan = DeviceMesh | Grid | SageMakerGroup


@dataclass(frozen=True)
class TPScheme:
    """One tensor-parallel scheme: its *name*, the type of its plan, and *build_program*,
    ``(model, plan, chunks) -> StepProgram`` for one rank (every rank runs the same, SPMD)."""

    name: SchemeName
    plan_type: type
    build_program: Callable[[ModelConfig, Any, int], StepProgram]


def _atp_program(model: ModelConfig, mesh: DeviceMesh, chunks: int) -> StepProgram:
    return build_step_program(model, mesh, chunks)


def _summa_program(model: ModelConfig, grid: Grid, chunks: int) -> StepProgram:
    return build_summa_program(model, grid.q, grid.depth, chunks)


def _sagemaker_program(model: ModelConfig, group: SageMakerGroup, chunks: int) -> StepProgram:
    return build_sagemaker_program(model, group.t, chunks)


_SCHEMES: dict[str, TPScheme] = {
    scheme.name: scheme
    for scheme in (
        TPScheme("atp", DeviceMesh, _atp_program),
        TPScheme("summa", Grid, _summa_program),
        TPScheme("sagemaker", SageMakerGroup, _sagemaker_program),
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
