"""The tensor-parallel schemes registered by name: each scheme's plan type picks its program
builder, the registry's names are the ones a scenario and a sweep point use, and an unknown
name or plan is refused with the valid ones."""

import pytest

from atpsim.compute.hardware import load_profile
from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.grid import Grid
from atpsim.parallel.memory import memory_per_rank
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import SageMakerGroup, build_sagemaker_program
from atpsim.parallel.schemes import build_tp_program, get_scheme, scheme_names, scheme_of
from atpsim.parallel.summa import build_summa_program
from atpsim.scenario.fields import SCHEMES
from atpsim.scenario.point import SweepPoint

TINY = ModelConfig("tiny", hidden=8, heads=4, layers=1, batch=4, seq=4)
PLANS = {"atp": DeviceMesh(2, 2), "summa": Grid(2, 1), "sagemaker": SageMakerGroup(2)}


def test_the_registry_names_the_schemes_a_scenario_may_ask_for():
    assert scheme_names() == ("atp", "summa", "sagemaker") == SCHEMES


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_plan_picks_its_scheme_as_a_sweep_point_names_it(name):
    tp = PLANS[name]
    point = SweepPoint("s", "ic3", "ic3", tp.size, "a100-sxm4-80gb", TINY, tp)
    assert scheme_of(tp) is get_scheme(name)
    assert scheme_of(tp).name == point.scheme


@pytest.mark.parametrize("chunks", [1, 2])
def test_each_scheme_builds_its_own_program(chunks):
    assert build_tp_program(TINY, DeviceMesh(2, 2), chunks) == build_step_program(
        TINY, DeviceMesh(2, 2), chunks
    )
    assert build_tp_program(TINY, Grid(2, 1), chunks) == build_summa_program(TINY, 2, 1, chunks)
    assert build_tp_program(TINY, SageMakerGroup(2), chunks) == build_sagemaker_program(
        TINY, 2, chunks
    )


def test_an_unknown_scheme_or_plan_is_refused_with_the_valid_ones():
    with pytest.raises(SimulationError, match="did you mean 'summa'"):
        get_scheme("suma")
    with pytest.raises(SimulationError, match="DeviceMesh"):
        scheme_of((2, 2))  # type: ignore[arg-type]


def test_memory_sees_a_summa_grid_as_one_layer_and_a_sagemaker_rank_as_its_own_samples():
    a100 = load_profile("a100-sxm4-80gb")
    assert memory_per_rank(TINY, Grid(2, 2), 1, a100) == memory_per_rank(
        TINY, DeviceMesh(2, 2), 1, a100
    )
    view = scheme_of(SageMakerGroup(2)).memory_view(TINY, SageMakerGroup(2))
    assert (view.weights_mesh, view.activation_model.batch, view.activation_mesh) == (
        DeviceMesh(2, 1), TINY.batch // 2, DeviceMesh(1, 1)
    )
