"""Job scenarios (issue 12): ``parallelism`` with tp / pp / dp / global_batch sweeps whole
training iterations; every layout that cannot run is one line naming its key (exit 2), a
layout that does not fit in memory is a row, and an interrupted job sweep resumes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from atpsim.api import rebuild_report, run_scenario
from atpsim.api.job_point import simulate_job_point
from atpsim.cli import main
from atpsim.results.io import read_results, read_rows
from atpsim.results.schema import JOB_SCHEMA
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.sweep import SweepInterrupted, run_sweep

#: A job small enough to simulate in well under a second: GPT-3 125M (12 layers) on 4 nodes
#: of 8 GPUs, TP 4x1 or any 2D mesh of 4, one or two stages, DP filling the rest.
TINY: dict[str, Any] = {
    "name": "tiny-job",
    "topology": "ib-cluster:4x8",
    "model": "gpt3-125m",
    "parallelism": {
        "tp": {"meshes": [[4, 1], "atp-opt"], "size": 4},
        "pp": [1, 2],
        "dp": "auto",
        "micro_batch": 1,
        "global_batch": 32,
        "sequence_parallel": True,
        "recompute": "selective",
        "zero": 1,
    },
}


def write(tmp_path: Path, data: dict[str, Any], name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def with_parallelism(**keys: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(TINY))
    data["parallelism"].update(keys)
    return data


# --- schema --------------------------------------------------------------------------------


def test_a_job_scenario_expands_into_job_points(tmp_path):
    scenario = load_scenario(write(tmp_path, TINY))
    points = expand_sweep(scenario)
    assert scenario.workload == "job" and all(isinstance(p, JobPoint) for p in points)
    layouts = [(f"{p.tp.d1}x{p.tp.d2}", p.pp, p.dp, p.sequence_parallel) for p in points]
    assert layouts == [
        ("4x1", 1, 8, True), ("4x1", 2, 4, True), ("2x2", 1, 8, False),
        ("2x2", 2, 4, False), ("1x4", 1, 8, False), ("1x4", 2, 4, False),
    ]  # fmt: skip
    assert {p.vocab for p in points} == {51200}  # the GPT-3 preset's padded vocabulary
    assert {p.n_microbatches for p in points} == {4, 8}


def test_job_keys_take_their_documented_forms(tmp_path):
    data = with_parallelism(tp=[[4, 1], "2x2"], pp=2, dp=4, schedule="interleaved",
                            virtual_stages=[1, 2], vocab=0, order=["pp", "tp", "dp"],
                            global_batch=[32, 64])  # fmt: skip
    points = expand_sweep(load_scenario(write(tmp_path, data)))
    assert {p.schedule for p in points} == {"interleaved-1f1b"}
    assert {(p.tp.d1, p.tp.d2) for p in points} == {(4, 1), (2, 2)}
    assert {p.virtual_stages for p in points} == {1, 2}
    assert {p.vocab for p in points} == {0} and {p.order for p in points} == {("pp", "tp", "dp")}


def test_step_scenarios_are_not_jobs(tmp_path):
    data = {"topology": "ic3", "model": "M2", "parallelism": {"devices": 8, "meshes": "atp-opt"}}
    assert load_scenario(write(tmp_path, data)).workload == "step"


#: bad input -> (key path, fragment of the message). Each is one line, exit code 2.
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "pipeline deeper than the layers": (
        {"pp": 128}, "parallelism.pp", "128 stages exceed the model's 12 layers"),
    "pipeline not dividing the layers": (
        {"pp": [1, 5]}, "parallelism.pp[1]", "12 layers (model 'gpt3-125m') do not split over 5"),
    "layout not filling the devices": (
        {"pp": 1, "dp": 4}, "parallelism.dp", "expected the 32 devices"),
    "tp x pp not dividing the devices": (
        {"devices": 24, "pp": 4, "tp": [[4, 1]]}, "parallelism.pp",
        "TP 4x1 x pp 4 = 16 GPUs do not divide the 24 devices"),
    "global batch not split by micro-batch x dp": (
        {"global_batch": 36}, "parallelism.global_batch",
        "expected a multiple of micro_batch x dp = 8"),
    "no global batch": ({"global_batch": None}, "parallelism.global_batch", "missing required key"),
    "TP mesh splitting the heads": (
        {"tp": [[8, 1]], "pp": 1}, "parallelism.tp.meshes[0]", "splits model.heads = 12"),
    "meshes beside tp": ({"meshes": "atp-opt"}, "parallelism.meshes", "remove 'meshes'"),
    "unknown schedule": ({"schedule": "zigzag"}, "parallelism.schedule", "unknown schedule 'zigzag'"),
    "unknown recompute": ({"recompute": "some"}, "parallelism.recompute", "expected one of none"),
    "ZeRO 2": ({"zero": 2}, "parallelism.zero", "expected ZeRO stage 0 or 1"),
    "ATP-i as a TP mesh": ({"tp": {"meshes": ["atp-2"]}}, "parallelism.tp.meshes[0]",
                           "a job's TP mesh is [d1, d2]"),
    "TP mesh not dividing the devices": (
        {"tp": {"meshes": [[3, 1]]}}, "parallelism.tp.meshes[0]", "3x1 (3 GPUs) does not divide the 32 devices"),
    "virtual stages without interleaving": (
        {"virtual_stages": 2}, "parallelism.virtual_stages", "need the interleaved schedule"),
    "negative vocabulary": ({"vocab": -1}, "parallelism.vocab", ""),
    "bad order": ({"order": ["tp", "dp"]}, "parallelism.order", "a permutation of [tp, pp, dp]"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_job_input_is_one_line_naming_the_key(tmp_path, monkeypatch, case):
    keys, key, fragment = BAD[case]
    data = with_parallelism(**{k: v for k, v in keys.items() if v is not None})
    for name in [k for k, v in keys.items() if v is None]:
        del data["parallelism"][name]
    path = write(tmp_path, data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{path}: {key}: " in lines[0] and fragment in lines[0], lines[0]


def test_analytic_mode_is_refused_for_a_job(tmp_path):
    data = {**TINY, "mode": ["des", "analytic"]}
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, data)), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "mode: a job scenario is simulated (des)" in result.output


# --- running -------------------------------------------------------------------------------


def test_a_job_scenario_runs_end_to_end(tmp_path):
    summary = run_scenario(write(tmp_path, TINY), tmp_path / "out", progress=False)
    frame = summary.frame
    assert list(frame.columns) == list(JOB_SCHEMA.names)
    assert len(frame) == 6 and set(frame["status"]) == {"ok"}
    assert frame["fits_memory"].all()
    parts = ("compute_s", "exposed_tp_comm_s", "exposed_dp_comm_s", "pipeline_bubble_s", "other_s")
    total = frame[list(parts)].sum(axis=1)
    assert (abs(total - frame["iteration_time_s"]) < 1e-9 * frame["iteration_time_s"]).all()
    assert list(frame["tp_scheme"]) == ["megatron-1d"] * 2 + ["atp-2d"] * 4
    assert list(frame["tp_mesh"]) == ["4x1", "4x1", "2x2", "2x2", "1x4", "1x4"]
    again = read_results(tmp_path / "out")
    assert ((again == frame) | (again.isna() & frame.isna())).all().all()  # no neighbour: NaN
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Best configurations" in md and "figures/job_breakdown.png" in md
    assert (tmp_path / "out" / "figures" / "job_breakdown.svg").is_file()
    rebuild_report(tmp_path / "out")  # `atpsim report DIR`: from results.csv alone
    assert (tmp_path / "out" / "report.md").read_text() == md


def test_a_layout_that_does_not_fit_is_a_row_not_an_error(tmp_path):
    """GPT-3 175B on one 8-GPU node (TP 8, no pipeline) needs far more than 80 GB per GPU:
    the row says so and is not simulated."""
    data = {"name": "too-big", "topology": "dgx-a100", "model": "gpt3-175b",
            "parallelism": {"tp": [[8, 1]], "global_batch": 8}}  # fmt: skip
    frame = run_scenario(write(tmp_path, data), tmp_path / "out", progress=False).frame
    row = frame.iloc[0]
    assert row["status"] == "ok" and not row["fits_memory"]
    assert row["memory_per_rank_bytes"] > 80e9 and frame["iteration_time_s"].isna().all()
    assert "No simulated point fits in memory." in (tmp_path / "out" / "report.md").read_text()


STOP_FILE = "FAKE_JOB_STOP"


def interrupting_job_simulate(point: JobPoint) -> dict[str, Any]:
    """:func:`simulate_job_point`, but Ctrl-C once $FAKE_JOB_COUNTER holds $FAKE_JOB_STOP calls."""
    counter = Path(os.environ["FAKE_JOB_COUNTER"])
    with open(counter, "ab") as handle:
        handle.write(b".")
    if counter.stat().st_size > int(os.environ["FAKE_JOB_STOP"]):
        raise KeyboardInterrupt
    return simulate_job_point(point)


def test_an_interrupted_job_sweep_resumes_to_the_clean_table(tmp_path, monkeypatch):
    points = expand_sweep(load_scenario(write(tmp_path, TINY)))
    counter = tmp_path / "counter"
    monkeypatch.setenv("FAKE_JOB_COUNTER", str(counter))
    monkeypatch.setenv("FAKE_JOB_STOP", "3")
    out = tmp_path / "run"
    with pytest.raises(SweepInterrupted):
        run_sweep(points, out, simulate=interrupting_job_simulate, progress=False)
    kept = read_rows(out / "results.partial.csv")
    assert len(kept) == 3 and list(kept[0]) == list(JOB_SCHEMA.names)

    counter.unlink()
    monkeypatch.setenv("FAKE_JOB_STOP", "1000")
    run_sweep(points, out, resume=True, simulate=interrupting_job_simulate, progress=False)
    assert counter.stat().st_size == len(points) - 3
    run_sweep(points, tmp_path / "clean", simulate=simulate_job_point, progress=False)
    assert (out / "results.csv").read_bytes() == (tmp_path / "clean" / "results.csv").read_bytes()


def test_cases_are_all_jobs_or_none(tmp_path):
    data = {**TINY, "cases": [{"parallelism": TINY["parallelism"]},
                              {"parallelism": {"meshes": "atp-opt"}}]}  # fmt: skip
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, data)), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "cases[1].parallelism: expected every case to be a job" in result.output
