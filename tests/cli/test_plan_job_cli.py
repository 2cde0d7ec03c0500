"""`atpsim plan --global-batch`: whole-job layouts ranked from the command line."""

from __future__ import annotations

from click.testing import CliRunner

from atpsim.api import ModelConfig, plan_job
from atpsim.cli import main


def run(*args: str):
    return CliRunner().invoke(main, ["plan", *args])


def test_the_best_layout_is_plan_jobs_best():
    result = run("-t", "ib-cluster:2x8", "-m", "gpt3-350m", "--global-batch", "32", "--pp", "1,2",
                 "--micro-batch", "1", "--top", "3")  # fmt: skip
    assert result.exit_code == 0, result.output
    gpt = ModelConfig("gpt3-350m", hidden=1024, heads=16, layers=24, batch=1, seq=2048)
    best = plan_job("ib-cluster:2x8", gpt, devices=16, global_batch=32, pipelines=(1, 2),
                    micro_batches=(1,)).best  # fmt: skip
    assert result.output.splitlines()[-1] == f"best: {best.label}"


def test_bad_job_options_are_one_line():
    result = run("-t", "ib-cluster:2x8", "-m", "gpt3-350m", "--global-batch", "32", "--pp", "two")
    assert result.exit_code == 2
    assert "--pp" in result.output and "Traceback" not in result.output


def test_network_isolated_ranks_each_call_alone_and_needs_a_job():
    args = ("-t", "ib-cluster:2x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1,2",
            "--micro-batch", "1", "--max-tp", "4")  # fmt: skip
    result = run(*args, "--network", "isolated")
    assert result.exit_code == 0, result.output
    assert "each call timed alone" in result.output
    best = plan_job("ib-cluster:2x8", "gpt3-125m", devices=16, global_batch=16, pipelines=(1, 2),
                    micro_batches=(1,), max_tp=4, network="isolated").best  # fmt: skip
    assert result.output.splitlines()[-1] == f"best: {best.label}"
    assert best.prediction.network == "isolated"
    refused = run("-t", "ib-cluster:2x8", "-m", "gpt3-125m", "--network", "isolated")
    assert refused.exit_code == 2 and "--network" in refused.output
