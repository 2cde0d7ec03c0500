"""`atpsim plan --global-batch`: whole-job layouts ranked from the command line."""

from __future__ import annotations

from io import StringIO

from click.testing import CliRunner
from rich.console import Console

from atpsim.api import plan_job
from atpsim.cli import main
from atpsim.commands.plan import layout_progress


def run(*args: str):
    return CliRunner().invoke(main, ["plan", *args])


def defaults_line(output: str) -> str:
    """The ``# defaults:`` line of *output* (a header line above the table; other header
    lines may come before it)."""
    return next(line for line in output.splitlines() if line.startswith("# defaults:"))


def test_the_best_layout_is_plan_jobs_best():
    result = run("-t", "ib-cluster:2x8", "-m", "gpt3-350m", "--global-batch", "32", "--pp", "1,2",
                 "--micro-batch", "1", "--top", "3")  # fmt: skip
    assert result.exit_code == 0, result.output
    # The preset by name: its vocabulary (51,200) is the default, as on the command line.
    best = plan_job("ib-cluster:2x8", "gpt3-350m", devices=16, global_batch=32, pipelines=(1, 2),
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
    search and a job scenario do); --no-sequence-parallel turns it off everywhere; the default
    tries each 1D layout both ways (a 2D mesh once, without), so its best is the faster of the
    two; the option needs a job."""
    plan = dict(devices=8, global_batch=16, pipelines=(1,), micro_batches=(2,), max_tp=2)
    on = plan_job("ib-cluster:1x8", "gpt3-125m", **plan, sequence_parallel=True)
    by_mesh = {(c.config.layout.tp.d1, c.config.layout.tp.d2): c.config.sequence_parallel for c in on.candidates}
    assert by_mesh == {(1, 1): False, (2, 1): True, (1, 2): False}  # over one rank: nothing to split
    off = plan_job("ib-cluster:1x8", "gpt3-125m", **plan, sequence_parallel=False)
    assert len(off.candidates) == 3 and not any(c.config.sequence_parallel for c in off.candidates)
    both = plan_job("ib-cluster:1x8", "gpt3-125m", **plan)
    tried = sorted((c.config.layout.tp.d1, c.config.layout.tp.d2, c.config.sequence_parallel)
                   for c in both.candidates)  # fmt: skip
    assert tried == [(1, 1, False), (1, 2, False), (2, 1, False), (2, 1, True)]
    fastest = min(on.best.prediction.iteration_time_s, off.best.prediction.iteration_time_s)
    assert both.best.prediction.iteration_time_s == fastest
    result = run(*JOB, "--sequence-parallel")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"best: {on.best.label}"
    assert run(*JOB, "--no-sequence-parallel").output.splitlines()[-1] == f"best: {off.best.label}"
    assert run(*JOB).output.splitlines()[-1] == f"best: {both.best.label}"
    refused = run("-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--sequence-parallel")
    assert refused.exit_code == 2 and "--sequence-parallel: does nothing without --global-batch" in refused.output


def test_the_first_line_names_the_defaulted_settings():
    """The header's ``# defaults:`` line: the hardware that ran (the topology's), the
    vocabulary (gpt3-125m's preset: 51,200), sequence parallelism (each 1D layout both ways),
    recomputation, ZeRO, the network and the schedule (atpsim.training.defaults), where the
    user left them."""
    result = run(*JOB)
    assert result.exit_code == 0, result.output
    assert defaults_line(result.output) == (
        "# defaults: --hardware a100-sxm4-80gb (the topology's), --vocab 51200 (the preset's), "
        "--sequence-parallel and --no-sequence-parallel (each 1D layout both ways), "
        "--recompute selective, --zero 1, --network joint, --schedule 1f1b")
    given = run(*JOB, "--hardware", "a100-sxm4-80gb", "--vocab", "0", "--zero", "0", "--no-sequence-parallel")
    assert defaults_line(given.output) == "# defaults: --recompute selective, --network joint, --schedule 1f1b"
    every = run(*JOB, "--hardware", "a100-sxm4-80gb", "--vocab", "0", "--zero", "0", "--no-sequence-parallel",
                "--recompute", "none", "--network", "joint", "--schedule", "1f1b")  # fmt: skip
    assert defaults_line(every.output) == "# defaults: none (every setting given)"


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


def test_layouts_that_cannot_make_the_top_are_counted_and_exhaustive_runs_them():
    """--top 1: layouts whose lower bound is above the fastest are not simulated, the caption
    says how many; --exhaustive simulates every one, and the best is the same."""
    args = ("-t", "ib-cluster:2x8", "-m", "gpt3-350m", "--global-batch", "32", "--pp", "1,2",
            "--micro-batch", "1,2", "--top", "1", "--no-progress")  # fmt: skip
    bounded, every = run(*args), run(*args, "--exhaustive")
    assert bounded.exit_code == 0 and every.exit_code == 0, bounded.output + every.output
    assert "not simulated (a lower bound above the 1 fastest" in " ".join(bounded.output.split())
    assert "not simulated" not in every.output
    assert bounded.output.splitlines()[-1] == every.output.splitlines()[-1]


def test_exhaustive_is_a_job_option():
    result = run("-t", "ib-cluster:2x8", "-m", "M1", "--exhaustive")
    assert result.exit_code == 2 and "--exhaustive" in result.output
