"""The API's part of each workload (:mod:`atpsim.api.workloads`): one entry per workload, a
job's trace selectors and parameter draws refused with the messages the run has always given."""

from __future__ import annotations

import pytest

from atpsim.api.job_point import simulate_job_point
from atpsim.api.point import simulate_point
from atpsim.api.scenario import scenario_draws
from atpsim.api.workloads import WORKLOADS, no_traces
from atpsim.errors import AtpsimError
from atpsim.scenario.schema import Scenario
from atpsim.scenario.workload import JOB, STEP
from atpsim.scenario.workload import WORKLOADS as NAMES

JOB_DATA = {"name": "j", "topology": "ib-cluster:4x8", "model": "gpt3-125m",
            "parallelism": {"tp": [[4, 1]], "global_batch": 32}}  # fmt: skip


def test_one_entry_per_workload():
    assert set(WORKLOADS) == set(NAMES)
    assert WORKLOADS[STEP].simulate is simulate_point and WORKLOADS[JOB].simulate is simulate_job_point
    assert WORKLOADS[STEP].draws and not WORKLOADS[JOB].draws


def test_a_job_has_no_traces():
    assert no_traces([], []) == []
    with pytest.raises(AtpsimError, match="traces are written for step scenarios"):
        no_traces([], ["best"])


def test_a_job_takes_no_draws():
    scenario = Scenario.model_validate(JOB_DATA)
    assert scenario_draws(scenario, None, None) is None
    with pytest.raises(AtpsimError, match="parameter draws are for step scenarios"):
        scenario_draws(scenario, 4, None)
