"""The one registry of simulation methods (atpsim.engine.methods): every choice's names, in
the order users see them, and the entry points that read it instead of tables of their own."""

import dataclasses

import pytest

from atpsim.engine import backends, methods
from atpsim.engine.joint.calls import CallSpec, joint_backends, plan_call
from atpsim.engine.methods import (
    ALONE,
    ANALYTIC,
    CLOSED_FORM,
    PLAIN,
    SHORTCUTS,
    SOLVERS,
    Method,
    find,
    names,
)
from atpsim.errors import SimulationError
from atpsim.topology.spec import load_topology
from atpsim.training.job import NETWORKS, joint_job


def test_every_choice_names_its_methods_in_order():
    assert names("engine") == ["auto", "reference", "longest-path"]
    assert sorted(names("backend")) == backends.backend_names() == ["closed-form", "event", "nccl"]
    assert names("network") == list(NETWORKS) == ["joint", "isolated"]
    assert names("granularity") == ["auto", "passes", "tasks"]
    assert names("mode") == ["des", "analytic"]


@pytest.mark.parametrize("choice, name, kind, exact, level", [
    ("engine", "reference", PLAIN, True, "collective call"),
    ("engine", "auto", SHORTCUTS, True, "collective call"),
    ("backend", "closed-form", CLOSED_FORM, False, "step"),
    ("network", "isolated", ALONE, False, "job"),
    ("granularity", "tasks", PLAIN, True, "job"),
    ("mode", "analytic", ANALYTIC, False, "point"),
])  # fmt: skip
def test_a_method_says_how_it_simulates(choice, name, kind, exact, level):
    method = find(choice, name)
    assert (method.kind, method.exact, method.level) == (kind, exact, level)


def test_what_the_entry_points_dispatch_on():
    assert find("engine", "auto").solvers == SOLVERS
    assert [s.name for s in find("engine", "longest-path").solvers] == ["longest-path"]
    assert find("engine", "longest-path").strict and find("granularity", "passes").strict
    traits = {n: (find("backend", n).on_network, find("backend", n).nccl) for n in names("backend")}
    assert traits == {"nccl": (True, True), "event": (True, False), "closed-form": (False, False)}
    assert find("backend", "event").timer is backends.event_times


def test_an_unknown_name_or_a_name_of_another_choice_is_none():
    assert find("engine", "joint") is None and find("mode", ["des"]) is None


def test_a_method_must_have_a_known_choice_and_kind():
    with pytest.raises(ValueError, match="expected a choice of"):
        methods.register(Method("x", "engines", PLAIN, True, "x"))
    with pytest.raises(ValueError, match="expected a choice of"):
        methods.register(dataclasses.replace(find("mode", "des"), kind="fast"))


def test_a_replaced_backend_loses_the_traits_it_does_not_restate(monkeypatch):
    monkeypatch.setattr(methods, "_METHODS", dict(methods._METHODS))
    backends.register_backend("event", backends.closed_form_times)
    assert not find("backend", "event").on_network and find("backend", "event").kind == CLOSED_FORM


def test_an_unknown_granularity_names_the_valid_ones():
    with pytest.raises(SimulationError, match="unknown granularity 'pass'; expected one of auto, passes, tasks"):
        joint_job(None, None, None, granularity="pass")


def test_the_joint_network_runs_the_backends_that_move_bytes():
    """The joint network plans the backends whose method is on the network (nccl, event), and
    refuses one that moves no bytes (closed-form) naming them."""
    assert joint_backends() == ["nccl", "event"]
    spec = CallSpec("closed-form", "all_reduce", "ring", ((0, 1),), 1e6, 0.0)
    with pytest.raises(SimulationError, match="runs the nccl and event backends, not 'closed-form'"):
        plan_call(spec, load_topology("ic1"))
