"""`atpsim plan --global-batch --partition` (issue 24): uneven pipelines from the command line."""

from __future__ import annotations

from click.testing import CliRunner

from atpsim.cli import main

#: GPT-3 125M (12 layers) on 5 GPUs without TP: only pp 1 splits the layers evenly.
SMALL = ("-t", "ib-cluster:1x8", "-m", "gpt3-125m", "-n", "5", "--global-batch", "10", "--max-tp", "1",
         "--micro-batch", "1", "--network", "isolated", "--no-progress")  # fmt: skip


def run(*args: str):
    return CliRunner().invoke(main, ["plan", *args])


def test_auto_tries_a_depth_that_does_not_divide_the_layers():
    even, auto = run(*SMALL), run(*SMALL, "--partition", "auto")
    assert even.exit_code == 0 and auto.exit_code == 0, auto.output
    assert "pp 5" not in even.output
    assert "pp 5 [" in auto.output  # the layout names its uneven split, e.g. pp 5 [2/3/3/3/1]


def test_listed_counts_run_and_bad_ones_are_one_line():
    listed = run(*SMALL, "--pp", "5", "--partition", "2,3,3,3,1")
    assert listed.exit_code == 0, listed.output
    assert "pp 5 [2/3/3/3/1]" in listed.output
    for bad, fragment in (("2,x", "expected even, auto or layer counts"), ("5,5", "holds 10 layers")):
        result = run(*SMALL, "--partition", bad)
        assert result.exit_code == 2 and "partition" in result.output and fragment in result.output
        assert "Traceback" not in result.output


def test_partition_needs_a_global_batch():
    result = run("-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--partition", "auto")
    assert result.exit_code == 2 and "--partition" in result.output


def test_a_search_with_auto_tries_the_uneven_depth(tmp_path):
    """The same 5 GPUs as a search space with ``partition: auto``: pp 1 and pp 5 are
    simulated (even would prune nothing and try pp 1 only)."""
    space = tmp_path / "space.yaml"
    space.write_text("name: uneven\ntopology: ib-cluster:1x8\nmodel: gpt3-125m\nparallelism:\n"
                     "  devices: 5\n  global_batch: 10\n  micro_batch: 1\n  partition: auto\n"
                     "  network: isolated\n", encoding="utf-8")  # fmt: skip
    result = CliRunner().invoke(main, ["search", "--space", str(space), "--max-tp", "1",
                                       "-o", str(tmp_path / "out"), "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 layouts to simulate" in result.output and "partition    auto" in result.output
