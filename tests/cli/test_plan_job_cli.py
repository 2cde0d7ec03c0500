"""`atpsim plan --global-batch`: whole-job layouts ranked from the command line."""

from __future__ import annotations

from io import StringIO

from click.testing import CliRunner
from rich.console import Console

from atpsim.api import ModelConfig, plan_job
from atpsim.cli import main
from atpsim.commands.plan import layout_progress


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


JOB = ("-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1",
       "--micro-batch", "2", "--max-tp", "2")  # fmt: skip


def test_sequence_parallel_is_an_option_for_the_1d_meshes_only():
    """--sequence-parallel reaches plan_job, which applies it to the 1D meshes (t, 1) alone (as a
    search and a job scenario do); the default stays off, and the option needs a job."""
    on = plan_job("ib-cluster:1x8", "gpt3-125m", devices=8, global_batch=16, pipelines=(1,),
                  micro_batches=(2,), max_tp=2, sequence_parallel=True)  # fmt: skip
    by_mesh = {(c.config.layout.tp.d1, c.config.layout.tp.d2): c.config.sequence_parallel for c in on.candidates}
    assert by_mesh == {(1, 1): True, (2, 1): True, (1, 2): False}
    off = plan_job("ib-cluster:1x8", "gpt3-125m", devices=8, global_batch=16, pipelines=(1,),
                   micro_batches=(2,), max_tp=2)  # fmt: skip
    assert not any(c.config.sequence_parallel for c in off.candidates)
    result = run(*JOB, "--sequence-parallel")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"best: {on.best.label}"
    assert run(*JOB, "--no-sequence-parallel").output.splitlines()[-1] == f"best: {off.best.label}"
    refused = run("-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--sequence-parallel")
    assert refused.exit_code == 2 and "--sequence-parallel: does nothing without --global-batch" in refused.output


def test_the_first_line_names_the_defaulted_settings():
    """The hardware that ran (the topology's), the vocabulary, sequence parallelism,
    recomputation, ZeRO, the network and the schedule, where the user left them."""
    result = run(*JOB)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "# defaults: --hardware a100-sxm4-80gb (the topology's), --vocab 0, --no-sequence-parallel, "
        "--recompute none, --zero 0, --network joint, --schedule 1f1b")
    given = run(*JOB, "--hardware", "a100-sxm4-80gb", "--vocab", "51200", "--zero", "1", "--no-sequence-parallel")
    assert given.output.splitlines()[0] == "# defaults: --recompute none, --network joint, --schedule 1f1b"


def test_the_progress_bar_is_on_a_terminal_only():
    """Without a terminal (tests, pipes, logs) nothing but the table is written; on one, a bar
    counts the simulated layouts, and yields each of them."""
    assert layout_progress(True, Console(file=StringIO())) is None
    assert layout_progress(False, Console(file=StringIO(), force_terminal=True)) is None
    screen = StringIO()
    track = layout_progress(True, Console(file=screen, force_terminal=True, width=100))
    assert track is not None and list(track([1, 2, 3])) == [1, 2, 3]
    assert "layouts" in screen.getvalue() and "3/3" in screen.getvalue()
    result = run(*JOB)
    assert "layouts ━" not in result.output and "━━" not in result.stderr
    assert run(*JOB, "--no-progress").output == result.output
