"""The API's part of each workload (:mod:`atpsim.api.workloads`): one entry per workload, each
with its timeline (one selector grammar, 'best' by the workload's time column); a job's
parameter draws taken as a step's are (:mod:`atpsim.api.uncertainty`)."""

from __future__ import annotations

import pytest

from atpsim.api.job_point import simulate_job_point
from atpsim.api.point import simulate_point
from atpsim.api.scenario import scenario_draws
from atpsim.api.workloads import WORKLOADS
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.errors import AtpsimError
from atpsim.scenario.schema import Scenario
from atpsim.scenario.workload import JOB, STEP
from atpsim.scenario.workload import WORKLOADS as NAMES

JOB_DATA = {"name": "j", "topology": "ib-cluster:4x8", "model": "gpt3-125m",
            "parallelism": {"tp": [[4, 1]], "global_batch": 32}}  # fmt: skip


def test_one_entry_per_workload():
    assert set(WORKLOADS) == set(NAMES)
    assert WORKLOADS[STEP].simulate is simulate_point and WORKLOADS[JOB].simulate is simulate_job_point


def test_each_workload_traces_by_its_own_columns_and_time():
    assert WORKLOADS[STEP].timeline.time_column == "step_time_s"
    assert WORKLOADS[JOB].timeline.time_column == "iteration_time_s"
    assert WORKLOADS[JOB].select_traces([], []) == []
    with pytest.raises(AtpsimError, match="unknown column 'mesh'.*did you mean 'tp_mesh'"):
        WORKLOADS[JOB].select_traces([], ["mesh=4x1,best"])


def test_a_job_takes_draws_only_when_asked():
    scenario = Scenario.model_validate(JOB_DATA)
    assert scenario_draws(scenario, None, None) is None
    assert scenario_draws(scenario, 4, 3) == Draws(4, 3)
    keyed = Scenario.model_validate({**JOB_DATA, "uncertainty": {"draws": 2, "seed": 1}})
    assert scenario_draws(keyed, None, None) == Draws(2, 1)
