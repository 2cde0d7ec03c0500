"""What crossed where: per-link bytes and busy time of an iteration, as a side table, a
figure, results columns, the plan's --links and counter tracks in the trace."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from atpsim.api.job_links import write_link_table
from atpsim.api.job_trace import simulate_job
from atpsim.cli import main
from atpsim.compute.models import ModelConfig
from atpsim.topology.spec import load_topology
from atpsim.training.links import link_uses

MODEL = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
JOB = {"topology": "ib-cluster:4x8", "model": MODEL, "tp": (8, 1), "pp": 2, "dp": 2,
       "micro_batch": 1, "global_batch": 8}  # fmt: skip


@pytest.fixture(scope="module")
def counted():
    return simulate_job(**JOB, links=True), load_topology("ib-cluster:4x8")


def test_every_byte_is_on_a_link_and_busy_time_fits_in_the_iteration(counted):
    """The sends and buckets cross the NICs: each send moves the stage's activations over the
    sender's PCIe link; no link is busy longer than the iteration."""
    prediction, topology = counted
    uses = link_uses(topology, prediction)
    assert uses and all(0 < u.busy_s <= prediction.iteration_time_s for u in uses)
    assert all(u.load <= u.utilization + 1e-12 for u in uses)  # bytes at most capacity x busy time
    assert [u.busy_s for u in uses] == sorted((u.busy_s for u in uses), reverse=True)
    assert {u.kind for u in uses} <= {"pcie", "ib"}  # TP on NVLink: passes as delays, not counted


def test_the_side_table_has_a_row_per_link(counted, tmp_path):
    prediction, topology = counted
    uses = link_uses(topology, prediction)
    rows = list(csv.DictReader(write_link_table(tmp_path / "links.csv", uses).open()))
    assert len(rows) == len(uses) and float(rows[0]["busy_s"]) == pytest.approx(uses[0].busy_s)


def test_links_off_leave_the_iteration_unchanged(counted):
    prediction, _ = counted
    assert simulate_job(**JOB).iteration_time_s == prediction.iteration_time_s


def test_the_trace_has_the_stages_and_counter_tracks_of_the_busiest_links(tmp_path):
    simulate_job(**JOB, trace=str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"r0 s0", "r1 s1", "busiest links"} <= names
    assert counters and all(e["args"]["calls in flight"] >= 0 for e in counters)
    assert max(e["args"]["calls in flight"] for e in counters) >= 1


def test_plan_links_writes_the_best_layouts_link_table_and_figure(tmp_path):
    target = tmp_path / "links.csv"
    result = CliRunner().invoke(main, ["plan", "-t", "ib-cluster:2x8", "-m", "M2", "--global-batch", "16",
                                       "--micro-batch", "1", "--top", "2", "--links", str(target)])
    assert result.exit_code == 0, result.output
    assert "busiest links of" in result.output
    assert target.exists() and target.with_suffix(".png").exists()
    rows = list(csv.DictReader(target.open()))
    assert rows and np.all(np.diff([float(r["busy_s"]) for r in rows]) <= 0)


def test_plan_links_needs_a_job_and_a_folder(tmp_path):
    alone = CliRunner().invoke(main, ["plan", "-t", "ib-cluster:2x8", "--links", str(tmp_path / "x.csv")])
    assert alone.exit_code == 2 and "--global-batch" in alone.output
    missing = CliRunner().invoke(main, ["plan", "-t", "ib-cluster:2x8", "-m", "M2", "--global-batch", "16",
                                        "--micro-batch", "1", "--links", str(tmp_path / "no" / "x.csv")])
    assert missing.exit_code == 2 and "no folder" in missing.output


def test_a_scenario_run_both_ways_reports_the_change_and_the_busiest_link(tmp_path):
    from atpsim.api import run_scenario
    from atpsim.results.io import read_results

    path = tmp_path / "both.yaml"
    path.write_text("""
name: both-ways
topology: ib-cluster:4x8
model: gpt3-350m
parallelism: {tp: [[8, 1]], pp: 2, dp: auto, micro_batch: 1, global_batch: 16, network: [joint, isolated]}
""")
    run_scenario(path, tmp_path / "out", progress=False)
    frame = read_results(tmp_path / "out")
    joint = frame[frame["network"] == "joint"].iloc[0]
    assert joint["busiest_link"] and 0 < joint["max_link_utilization"] <= 1
    assert frame[frame["network"] == "isolated"]["busiest_link"].isna().all()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Calls alone against one network for every call" in report
