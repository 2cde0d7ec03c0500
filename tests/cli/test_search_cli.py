"""`atpsim search` (issue 15): a design space's whole-job layouts, pruned before simulation
(divisibility, memory), simulated on the sweep's executors, resumable, the best printed and
every row in results.csv; the same layouts and times as `plan --global-batch`."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atpsim.api import plan_job
from atpsim.api.search import check_space_size, run_search, search_points, search_space
from atpsim.cli import main
from atpsim.errors import ScenarioError, SizeLimitError
from atpsim.results.io import read_rows
from atpsim.scenario.job_point import JobPoint
from atpsim.sweep.progress import SweepProgress

SMALL = {"topology": ["ib-cluster:1x8"], "model": ["gpt3-125m"],
         "parallelism": {"global_batch": [16], "pp": [1, 2], "micro_batch": [2]}}  # fmt: skip
OPTIONS = ["-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1,2",
           "--micro-batch", "2", "--no-progress"]  # fmt: skip


def defaults_line(output: str) -> str:
    """The ``# defaults:`` line of *output* (a header line above the table; other header
    lines may come before it)."""
    return next(line for line in output.splitlines() if line.startswith("# defaults:"))


def fake_job(point: JobPoint) -> dict[str, Any]:
    """A row from the layout alone (no simulation): more TP or PP is slower."""
    time_s = 0.1 * point.tp.size + 0.05 * point.pp + 0.01 * point.tp.d2
    return {"iteration_time_s": time_s, "tflops_per_gpu": 10.0 / time_s, "mfu": 0.3,
            "memory_per_rank_bytes": 1e9 * (8 / point.tp.size), "fits_memory": True}  # fmt: skip


def test_layouts_that_split_the_heads_or_do_not_fit_are_pruned_before_simulation():
    """gpt3-125m has 12 heads: the 4 meshes of 8 GPUs split them unevenly, and 8x1 is tried
    with and without sequence parallelism (the default), 5 pruned; the 12 layouts that stay
    are 16 rows, each 1D one of more than one rank (2x1, 4x1 at pp 1 and 2) both ways (1x1:
    sequence parallelism over one rank changes nothing, so once). Sequence parallelism off
    (asked): the 12 once each, 4 pruned. gpt3-13b at TP 1 x PP 1 with ZeRO 0 (asked: ZeRO-1,
    the default, splits the optimizer state over the 8 replicas and fits) needs more than 80 GB
    a rank."""
    small = search_points(search_space(**SMALL))
    assert len(small) == 16 and small.pruned == {"divisibility": 5}
    assert {p.tp.size for p in small} == {1, 2, 4}
    assert sum(p.sequence_parallel for p in small) == 4
    assert all(p.tp.d2 == 1 for p in small if p.sequence_parallel)
    off = search_points(search_space(**{**SMALL, "parallelism": {**SMALL["parallelism"], "sequence_parallel": False}}))
    assert len(off) == 12 and off.pruned == {"divisibility": 4} and not any(p.sequence_parallel for p in off)
    large = search_points(search_space(**{**SMALL, "model": ["gpt3-13b"],
                                          "parallelism": {"global_batch": [16], "pp": [1], "zero": 0}}))
    assert large.pruned["memory"] > 0 and all(p.tp.size > 1 for p in large)


def test_the_layout_limit_is_an_argument(tmp_path):
    """SMALL makes 10 meshes x 2 depths x 2 sequence-parallel settings (the default: on and
    off) = 40 candidates: refused past ``max_layouts=39``, the message naming the parameter (a
    command shows it as ATPSIM_MAX_LAYOUTS), before any file is written; accepted at 40.
    Sequence parallelism off (asked): 20."""
    space = search_space(**SMALL)
    assert check_space_size(space, max_layouts=40) == 40
    with pytest.raises(SizeLimitError, match="set `max_layouts=40`"):
        run_search(space, tmp_path / "out", max_layouts=39, progress=False)
    assert not (tmp_path / "out").exists()
    off = search_space(**{**SMALL, "parallelism": {**SMALL["parallelism"], "sequence_parallel": False}})
    assert check_space_size(off, max_layouts=20) == 20
    with pytest.raises(SizeLimitError, match="set `max_layouts=20`"):
        check_space_size(off, max_layouts=19)


def test_a_search_simulates_what_plan_job_does(tmp_path):
    """Three meshes of 8 GPUs (TP meshes of at most 2), simulated for real both ways, each
    taking the same defaults (the preset's vocabulary, selective recomputation, ZeRO-1, 1F1B)
    and trying the 1D mesh 2x1 with and without sequence parallelism: 4 layouts."""
    space = search_space(**{**SMALL, "parallelism": {"global_batch": [16], "pp": [1], "micro_batch": [2]}})
    result = run_search(space, tmp_path, max_tp=2, progress=False)
    plan = plan_job("ib-cluster:1x8", "gpt3-125m", devices=8, global_batch=16, max_tp=2,
                    pipelines=(1,), micro_batches=(2,))  # fmt: skip
    planned = {(c.config.layout.tp.d1, c.config.layout.tp.d2, c.config.sequence_parallel):
               c.prediction.iteration_time_s for c in plan.candidates}  # fmt: skip
    assert len(planned) == 4
    rows = read_rows(result.table.path)
    assert len(rows) == 4 and {(r["vocab"], r["recompute"], r["zero"], r["schedule"]) for r in rows} == {
        (51200, "selective", 1, "1f1b")}
    searched = {(r["d1"], r["d2"], r["sequence_parallel"]): r["iteration_time_s"] for r in rows}
    assert searched == pytest.approx(planned, rel=1e-9)
    assert result.best["iteration_time_s"].iloc[0] == pytest.approx(min(planned.values()), rel=1e-9)


def test_the_command_prints_the_best_and_writes_every_row(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    result = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path), "--top", "3"])
    assert result.exit_code == 0, result.output
    assert re.search(r"search search-[0-9a-f]{8}: 16 layouts to simulate; pruned before simulation: "
                     "5 by divisibility", result.stdout)  # named by its options' hash (issue 25)
    assert "the 3 best layouts" in result.stdout
    assert "16 layouts simulated (0 failed), 5 pruned before simulation" in result.stdout
    answer = result.stdout.split("the answer: ")[1].splitlines()
    assert answer[1].startswith("  ") and ": Megatron-LM 1D 1x1, pp 1, " in answer[1]
    assert ", 0.16 s (" in answer[1]  # fake times: 0.1 * tp + 0.05 * pp + 0.01 * d2, d2 = 1
    rows = read_rows(tmp_path / "results.csv")
    assert len(rows) == 16 and [r["point_index"] for r in rows] == list(range(16))
    best = max(rows, key=lambda r: r["tflops_per_gpu"])
    assert (best["tp_mesh"], best["pp"]) == ("1x1", 1)
    again = CliRunner().invoke(main, ["search", "--space", str(tmp_path / "search.yaml"),
                                      "-o", str(tmp_path), "--resume", "--no-progress"])
    assert again.exit_code == 0 and "resuming: 16 of 16 points already done" in again.stderr


def test_an_interrupted_search_resumes_to_the_same_table(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    run = ["search", *OPTIONS, "-o", str(tmp_path / "a")]
    advance, advanced = SweepProgress.advance, []

    def advance_then_interrupt(bar: SweepProgress, failed: bool = False) -> None:
        advance(bar, failed=failed)
        advanced.append(failed)
        if len(advanced) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(SweepProgress, "advance", advance_then_interrupt)
    stopped = CliRunner().invoke(main, run)
    assert stopped.exit_code == 130 and "interrupted: 5 of 16 points kept" in stopped.stderr
    monkeypatch.setattr(SweepProgress, "advance", advance)
    assert CliRunner().invoke(main, [*run, "--resume"]).exit_code == 0
    clean = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "b")])
    assert clean.exit_code == 0
    assert (tmp_path / "a" / "results.csv").read_bytes() == (tmp_path / "b" / "results.csv").read_bytes()


@pytest.mark.parametrize(("args", "expected"), [
    (["-t", "ib-cluster:1x8", "-m", "gpt3-125m"],
     "atpsim: error: atpsim search: parallelism.global_batch: a search space is a whole job's"),
    ([*OPTIONS[:6], "--pp", "1,x"],
     "atpsim: error: --pp: expected a comma-separated list like '1,2,4', got '1,x'"),
    ([*OPTIONS[:4], "--global-batch", "3", "--pp", "1", "--micro-batch", "2"],
     "atpsim: error: atpsim search: parallelism: no layout of the space divides the model and fits in memory"),
    ([*OPTIONS, "--scheduler", "http://host:8786"],
     "atpsim: error: --scheduler: expected 'local' or a scheduler address such as tcp://host:8786"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, expected):
    result = CliRunner().invoke(main, ["search", *args, "-o", str(tmp_path)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("atpsim:")]
    assert len(errors) == 1 and errors[0].startswith(expected), result.stderr


def test_a_space_file_s_unknown_key_names_the_file_and_the_nearest_key(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("topology: ib-cluster:1x8\nmodel: gpt3-125m\n"
                     "parallelism: {global_batch: 16, micro_batchs: 2}\n")  # fmt: skip
    with pytest.raises(ScenarioError) as info:
        search_space(space)
    assert info.value.format().startswith(f"{space}: parallelism.micro_batchs: unknown key")
    assert "micro_batch" in info.value.message


def test_a_dask_search_writes_the_table_of_a_serial_one(tmp_path, monkeypatch):
    from distributed import LocalCluster

    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    serial = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "serial")])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                      dashboard_address=":0") as cluster:  # fmt: skip
        on_dask = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "dask"),
                                            "--scheduler", cluster.scheduler_address])
    assert serial.exit_code == on_dask.exit_code == 0, on_dask.output
    assert (tmp_path / "dask" / "results.csv").read_bytes() == (tmp_path / "serial" / "results.csv").read_bytes()


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.sweep.dask_executor.CONNECT_TIMEOUT_S", 0.5)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path),
                                       "--scheduler", f"tcp://127.0.0.1:{port}"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].startswith("atpsim: error: --scheduler: cannot reach a Dask scheduler")
    assert not Path(tmp_path / "results.csv").exists()


def test_network_isolated_is_searched_and_named_in_every_row(tmp_path, monkeypatch):
    """--network (or the space's parallelism.network) is an axis of the search: each layout
    once per network, innermost, and every row says which ran; search.yaml lists it. 16
    layouts a network (each 1D one of 2 or more ranks with and without sequence parallelism, the
    default)."""
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    one = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "one"), "--network", "isolated"])
    assert one.exit_code == 0, one.output
    rows = read_rows(tmp_path / "one" / "results.csv")
    assert len(rows) == 16 and {r["network"] for r in rows} == {"isolated"}
    assert "  network:\n  - isolated\n" in (tmp_path / "one" / "search.yaml").read_text()
    assert "  network      isolated\n" in one.stdout
    both = search_space(**{**SMALL, "parallelism": {**SMALL["parallelism"], "network": ["joint", "isolated"]}})
    points = search_points(both)
    assert len(points) == 32 and points.pruned == {"divisibility": 10}
    assert [p.network for p in points][:2] == ["joint", "isolated"]
    assert check_space_size(both) == 80
    refused = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "bad"), "--network", "shared"])
    assert refused.exit_code == 2 and "parallelism.network" in refused.stderr


@pytest.mark.parametrize(("text", "key"), [
    ("mode: des\n", "mode"),
    ("parallelism: {global_batch: 16, perturb: {seed: 1, stragglers: 1}}\n", "parallelism.perturb"),
    ("parallelism: {global_batch: 16, neighbour: {model: gpt3-125m, tp: [1, 1]}}\n", "parallelism.neighbour"),
    ("parallelism: {global_batch: 16}\ncases: [{parallelism: {global_batch: 16, perturb: {}}}]\n",
     "cases.0.parallelism.perturb"),
    ("parallelism: {global_batch: 16}\nreport: {title: x}\n", "report"),
])  # fmt: skip
def test_a_space_key_a_search_does_not_use_is_refused_by_name(tmp_path, text, key):
    """Not silently dropped (rows saying joint and unperturbed while search.yaml lists
    them): one line naming the file and the key, exit 2."""
    space = tmp_path / "space.yaml"
    space.write_text("topology: ib-cluster:1x8\nmodel: gpt3-125m\n" + text)
    result = CliRunner().invoke(main, ["search", "--space", str(space), "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("atpsim:")]
    assert len(errors) == 1 and errors[0].startswith(f"atpsim: error: {space}: {key}: "), result.stderr
    assert not (tmp_path / "out").exists()


def test_the_first_line_names_the_defaulted_settings(tmp_path, monkeypatch):
    """The header's ``# defaults:`` line: the hardware (the topology's), the vocabulary (the
    preset's), sequence parallelism (on and off: each 1D layout both ways), recomputation,
    ZeRO, the network and the schedule (atpsim.training.defaults), where the space leaves
    them."""
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    result = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert defaults_line(result.stdout) == (
        "# defaults: hardware a100-sxm4-80gb (the topology's); vocab 51200 (gpt3-125m's); "
        "sequence_parallel true, false; recompute selective; zero 1; network joint; schedule 1f1b")
    given = CliRunner().invoke(main, ["search", *OPTIONS, "-o", str(tmp_path / "b"), "--vocab", "0",
                                      "--zero", "0,1", "--network", "joint", "--hardware", "h100-sxm"])
    assert defaults_line(given.stdout) == (
        "# defaults: sequence_parallel true, false; recompute selective; schedule 1f1b")


def test_uncertainty_adds_the_iteration_time_s_percentiles_under_the_same_draws(tmp_path):
    """Four layouts of 8 GPUs (TP meshes of at most 2, pp 1; 2x1 with and without
    sequence parallelism, the default), each simulated for real under 2 draws: p10 <= p50 <= p90 in every row and in the printed table; the same seed gives
    the same numbers; --resume keeps the drawn rows (their keys name the draws); without
    --uncertainty no percentile column and an unchanged table."""
    tiny = ["-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1",
            "--micro-batch", "2", "--max-tp", "2", "--no-progress"]  # fmt: skip
    drawn = [*tiny, "--uncertainty", "2", "--seed", "1"]
    one = CliRunner().invoke(main, ["search", *drawn, "-o", str(tmp_path / "one")])
    assert one.exit_code == 0, one.output
    assert "p50 s" in one.stdout
    rows = read_rows(tmp_path / "one" / "results.csv")
    assert len(rows) == 4 and all(r["draws"] == 2 and r["draw_seed"] == 1 for r in rows)
    assert all(r["iteration_time_s_p10"] <= r["iteration_time_s_p50"] <= r["iteration_time_s_p90"] for r in rows)
    two = CliRunner().invoke(main, ["search", *drawn, "-o", str(tmp_path / "two")])
    assert two.exit_code == 0, two.output
    same = (tmp_path / "two" / "results.csv").read_bytes()
    assert same == (tmp_path / "one" / "results.csv").read_bytes()
    resumed = CliRunner().invoke(main, ["search", *drawn, "-o", str(tmp_path / "two"), "--resume"])
    assert resumed.exit_code == 0 and "4 of 4 points already done" in resumed.output, resumed.output
    assert (tmp_path / "two" / "results.csv").read_bytes() == same
    plain = CliRunner().invoke(main, ["search", *tiny, "-o", str(tmp_path / "plain")])
    assert plain.exit_code == 0 and "p50 s" not in plain.stdout
    assert not any(key.startswith("iteration_time_s_p") for key in read_rows(tmp_path / "plain" / "results.csv")[0])
