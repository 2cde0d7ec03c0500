"""One registry entry per workload (issue 22): a scenario, its parallelism and its points name
their workload, the expander of each is looked up by it, and a job point's JobConfig is made
from the fields the two share by name, so neither can drift from the other."""

from __future__ import annotations

from dataclasses import fields

from atpsim.compute.models import model_preset
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.results.schema import SCHEMAS
from atpsim.scenario.job_point import CONFIG_FIELDS, NOT_ON_POINT, JobPoint
from atpsim.scenario.point import SweepPoint
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import EXPANDERS, describe_sweep, expand_sweep
from atpsim.scenario.workload import JOB, STEP, WORKLOADS
from atpsim.training.config import JobConfig

STEP_DATA = {"name": "s", "topology": "ic1", "model": "M2", "chunks": [1, 2]}
JOB_DATA = {"name": "j", "topology": "ib-cluster:4x8", "model": "gpt3-125m",
            "parallelism": {"tp": [[4, 1]], "pp": [1, 2], "global_batch": 32}}  # fmt: skip


def job_point(**changes) -> JobPoint:
    fields_ = {"scenario": "j", "topology": "ib-cluster:4x8", "topology_label": "ib",
               "n_devices": 32, "hardware": "a100-sxm4-80gb", "model": model_preset("gpt3-125m"),
               "tp": DeviceMesh(4, 1), "pp": 2, "dp": 4, "micro_batch": 1, "global_batch": 32,
               "schedule": "interleaved-1f1b", "virtual_stages": 2, "chunks": 1,
               "algorithm": "tree", "sequence_parallel": True, "recompute": "selective",
               "zero": 1, "vocab": 50304, "order": ("tp", "dp", "pp")}  # fmt: skip
    return JobPoint(**(fields_ | changes))


def test_every_workload_has_one_expander_one_point_type_and_one_table():
    assert set(EXPANDERS) == set(WORKLOADS) == set(SCHEMAS) == {STEP, JOB}
    assert (SweepPoint.workload, JobPoint.workload) == (STEP, JOB)
    assert all(SCHEMAS[point.workload] is point.schema for point in (SweepPoint, JobPoint))


def test_a_scenario_names_its_workload_and_its_points_agree():
    for data, workload in ((STEP_DATA, STEP), (JOB_DATA, JOB)):
        scenario = Scenario.model_validate(data)
        assert scenario.workload == scenario.parallelism.workload == workload
        assert {p.workload for p in expand_sweep(scenario)} == {workload}


def test_describe_counts_each_case_with_its_workloads_expander():
    """The 4x1 mesh with and without sequence parallelism (the default): case 0 (pp 1) is 2
    points, case 1 (pp 1, 2) 4, the scenario 4 (case 0's are case 1's). With sequence
    parallelism off (asked) case 0 is 1 point, still one of case 1's."""
    cases = [{"parallelism": {"tp": [[4, 1]], "pp": 1, "global_batch": 32}},
             {"parallelism": {"tp": [[4, 1]], "pp": [1, 2], "global_batch": 32}}]  # fmt: skip
    text = describe_sweep(Scenario.model_validate({**JOB_DATA, "cases": cases}))
    assert text.splitlines()[:2] == ["scenario j: 4 points", "  cases[0]: 2 points"]
    assert "  cases[1]: 4 points" in text
    assert "    seq. par.    true, false (1D TP only)" in text
    assert "    global_batch 32" in text  # the job axes' 12-character column
    off = [{"parallelism": {**cases[0]["parallelism"], "sequence_parallel": False}}, cases[1]]
    text = describe_sweep(Scenario.model_validate({**JOB_DATA, "cases": off}))
    assert text.splitlines()[:2] == ["scenario j: 4 points", "  cases[0]: 1 point"]
    assert "    seq. par.    false (1D TP only)" in text and "  cases[1]: 4 points" in text


def test_every_jobconfig_field_is_carried_by_the_point_or_named_as_not():
    names = {f.name for f in fields(JobConfig)}
    assert names == set(CONFIG_FIELDS) | NOT_ON_POINT
    assert set(CONFIG_FIELDS) <= {f.name for f in fields(JobPoint)}


def test_a_job_points_config_is_its_fields_and_layout():
    point = job_point()
    assert point.config() == JobConfig(
        point.model, ParallelLayout(DeviceMesh(4, 1), 2, 4, ("tp", "dp", "pp")), 1, 32,
        schedule="interleaved-1f1b", virtual_stages=2, chunks=1, algorithm="tree", zero=1,
        recompute="selective", sequence_parallel=True, vocab=50304,
    )  # fmt: skip


def test_a_point_made_from_its_config_is_the_same_point_with_the_same_key():
    point = job_point()
    given = {name: getattr(point, name) for name in ("scenario", "topology", "topology_label",
                                                      "n_devices", "hardware", "model", "vocab")}  # fmt: skip
    again = JobPoint.from_config(point.config(), **given)
    assert again == point and again.key() == point.key()
