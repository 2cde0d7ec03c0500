"""The package's own types and building blocks, re-exported for code outside the package:
the torch validation harness (``validation/``) builds the same layer programs and meshes as
the simulator, and the benchmarks (``bench/``) call the engine directly."""

from __future__ import annotations

from atpsim.collectives.closed_form import bus_factor
from atpsim.collectives.registry import build_schedule
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.compute.timing import memory_op_class
from atpsim.engine.collective import run_collective
from atpsim.errors import AtpsimError, SimulationError
from atpsim.parallel.atp import build_step_program, layer_dims
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.parallel.ops import LayerDims

__all__ = [
    "AtpsimError",
    "DeviceMesh",
    "LayerDims",
    "ModelConfig",
    "SimulationError",
    "build_schedule",
    "build_step_program",
    "bus_factor",
    "factorizations",
    "layer_dims",
    "memory_op_class",
    "model_preset",
    "run_collective",
]
