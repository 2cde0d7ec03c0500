"""Two backends, one oracle: where nothing is shared, swapping the link-level engine for the
closed forms (atpsim.engine.backends) changes no time, for one collective or a whole step."""

import pytest

from atpsim.collectives.registry import algorithm_names, op_names
from atpsim.compute.hardware import load_profile
from atpsim.compute.models import ModelConfig
from atpsim.engine import methods
from atpsim.engine.backends import backend_names, get_backend, register_backend
from atpsim.engine.collective import run_collective
from atpsim.engine.step.run import simulate_des_step
from atpsim.errors import SimulationError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import star

B, LINK_LAT = 50e9, 7e-7
ALL = [(op, alg) for op in op_names() for alg in algorithm_names(op)]
TINY = ModelConfig("tiny", hidden=256, heads=4, layers=2, batch=2, seq=128)


def reference_times(topology, op, algorithm, groups, nbytes):
    """A backend of the plain reference run (engine 'reference'), for the oracle tests."""
    return run_collective(topology, op, algorithm, groups, nbytes, engine="reference").group_time_s


def test_the_registered_backends():
    assert backend_names() == ["closed-form", "event", "nccl"]


@pytest.mark.parametrize("op,algorithm", ALL)
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8, 11])
@pytest.mark.parametrize("nbytes", [4096.0, 3 * 2**20 + 5, 2.0**30])
def test_the_reference_run_equals_the_closed_form_on_a_switch(op, algorithm, p, nbytes):
    """Every path is two links (alpha = 2 x 0.7 us, B = 50 GB/s). On a switch the bidirectional
    ring's halves share each GPU's link: the ring's closed form."""
    topo = star(p, bandwidth_Bps=B, latency_s=LINK_LAT)
    groups = [list(range(p))]
    formula = "ring" if algorithm == "bidirectional-ring" else algorithm
    expected = get_backend("closed-form")(topo, op, formula, groups, nbytes)
    assert reference_times(topo, op, algorithm, groups, nbytes) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("algorithm", ["ring", "bidirectional-ring"])
@pytest.mark.parametrize("p", [2, 3, 5, 8])
@pytest.mark.parametrize("timer", [get_backend("event"), reference_times], ids=["event", "reference"])
def test_the_engine_equals_the_closed_form_on_a_torus_ring(op, algorithm, p, timer):
    """A 1D torus of p GPUs: every ring hop is one link of its own, each direction apart."""
    topo = torus(dims=(p,), link_bandwidth_Bps=B, link_latency_s=LINK_LAT)
    groups = [list(range(p))]
    expected = get_backend("closed-form")(topo, op, algorithm, groups, 3e7)
    assert timer(topo, op, algorithm, groups, 3e7) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("mesh", [(4, 1), (2, 2), (1, 4)])
def test_a_step_on_a_switch_is_the_same_with_either_backend(mesh):
    """The groups of a mesh dimension on a switch share no link: the step scheduler gives the
    same timeline whichever backend times the collectives."""
    topo, profile = star(4, bandwidth_Bps=B, latency_s=LINK_LAT), load_profile("a100-sxm4-80gb")
    event = simulate_des_step(topo, profile, TINY, DeviceMesh(*mesh), 2, "ring")
    closed = simulate_des_step(topo, profile, TINY, DeviceMesh(*mesh), 2, "ring", backend="closed-form")
    assert closed.comm_time_s == pytest.approx(event.comm_time_s, rel=1e-9)
    assert closed.step_time_s == pytest.approx(event.step_time_s, rel=1e-9)
    assert event.comm_time_s > 0


def test_a_registered_backend_times_the_step(monkeypatch):
    monkeypatch.setattr(methods, "_METHODS", dict(methods._METHODS))
    register_backend("free", lambda topology, op, algorithm, groups, nbytes: (0.0,) * len(groups))
    result = simulate_des_step(star(4), load_profile("a100-sxm4-80gb"), TINY, DeviceMesh(2, 2), 1,
                               "ring", backend="free")
    assert "free" in backend_names() and result.comm_time_s == 0.0


@pytest.mark.parametrize("name,message", [
    ("closed_form", r"did you mean 'closed-form'\?\); expected one of \['closed-form', 'event', 'nccl'\]"),
    ("ns3", r"expected one of \['closed-form', 'event', 'nccl'\]"),
])
def test_an_unknown_backend_names_the_valid_ones(name, message):
    with pytest.raises(SimulationError, match=message):
        get_backend(name)
    with pytest.raises(SimulationError, match=message):
        simulate_des_step(star(4), load_profile("a100-sxm4-80gb"), TINY, DeviceMesh(2, 2), 1,
                          "ring", backend=name)
