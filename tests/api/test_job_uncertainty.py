"""A whole job's interval (issue 23): `plan_job(..., uncertainty=N)` / `plan --global-batch
--uncertainty N` and job scenarios with draws. The draws are a step's (one drawn machine for
both workloads); the point estimate is untouched, the intervals are ordered, the same seed
gives the same numbers, and the probability that the best is best is a share of draws."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import atpsim.api as api
from atpsim.cli import main

JOB = dict(devices=8, global_batch=16, pipelines=(1,), micro_batches=(2,), max_tp=2)
ARGS = ["plan", "-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1",
        "--micro-batch", "2", "--max-tp", "2", "--top", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def plans():
    plain = api.plan_job("ib-cluster:1x8", "gpt3-125m", **JOB)
    drawn = api.plan_job("ib-cluster:1x8", "gpt3-125m", **JOB, uncertainty=3, seed=1, top=2)
    return plain, drawn


def test_draws_leave_the_ranking_and_its_numbers_as_they_were(plans):
    plain, drawn = plans
    assert plain.confidence is None and plain.uncertainty is None
    assert all(c.draws is None and c.interval is None for c in plain.candidates)
    # the drawn plan (top 2) skips layouts that cannot make its top 2: its first two are the plain plan's
    assert [(c.label, c.prediction) for c in drawn.candidates[:2]] == \
        [(c.label, c.prediction) for c in plain.candidates[:2]]


def test_the_top_layouts_get_ordered_intervals_and_the_best_a_probability(plans):
    _, drawn = plans
    assert drawn.drawn == 2 and all(c.draws is None for c in drawn.candidates[2:])
    assert drawn.sources == ("nccl:a100", "gemm:a100-sxm4-80gb")
    for candidate in drawn.candidates[:2]:
        assert len(candidate.draws) == 3
        interval = candidate.interval
        assert interval.p10 <= interval.p50 <= interval.p90
    confidence = drawn.confidence
    assert confidence.draws == 3 and 0.0 <= confidence.p_best <= 1.0
    assert len(confidence.p_best_by_candidate) == 2


def test_the_same_seed_gives_the_same_draws(plans):
    _, drawn = plans
    again = api.plan_job("ib-cluster:1x8", "gpt3-125m", **JOB, uncertainty=3, seed=1, top=1)
    assert again.candidates[0].draws == drawn.candidates[0].draws


def test_plan_global_batch_prints_the_intervals_and_how_sure_the_best_is():
    result = CliRunner().invoke(main, [*ARGS, "--uncertainty", "2", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "p10-p90 s" in result.output and "P(best)" in result.output
    text = " ".join(result.output.split())
    assert "Under 2 draws of the fitted parameters (nccl:a100 + gemm:a100-sxm4-80gb; seed 1), " \
           "drawn for the 2 fastest layouts (--top)" in text
    plain = CliRunner().invoke(main, ARGS)
    assert plain.exit_code == 0 and "P(best)" not in plain.output and "Under" not in plain.output


def test_a_job_scenario_with_draws_adds_iteration_time_percentiles(tmp_path):
    data = {"name": "tiny-job", "topology": "ib-cluster:1x8", "model": "gpt3-125m",
            "parallelism": {"tp": [[2, 1], [1, 2]], "global_batch": 16, "micro_batch": 2}}  # fmt: skip
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**data, "uncertainty": {"draws": 2, "seed": 3}}))
    api.run_scenario(path, tmp_path / "drawn", progress=False)
    drawn = pd.read_csv(tmp_path / "drawn" / "results.csv")
    path.write_text(yaml.safe_dump(data))
    api.run_scenario(path, tmp_path / "plain", progress=False)
    plain = pd.read_csv(tmp_path / "plain" / "results.csv")
    assert "iteration_time_s_p50" not in plain.columns
    assert list(drawn["iteration_time_s"]) == list(plain["iteration_time_s"])
    assert (drawn["draws"] == 2).all() and (drawn["draw_seed"] == 3).all()
    assert (drawn["iteration_time_s_p10"] <= drawn["iteration_time_s_p50"]).all()
    assert (drawn["iteration_time_s_p50"] <= drawn["iteration_time_s_p90"]).all()
