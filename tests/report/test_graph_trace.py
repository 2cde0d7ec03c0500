"""An iteration's task graph as a Chrome trace (:func:`atpsim.report.trace.graph_trace`): one
event per labelled task, a pass built of many tasks as one span, its TP collectives on a
track of their own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from atpsim.api import simulate_job
from atpsim.compute.models import ModelConfig
from atpsim.report.trace import graph_intervals, graph_trace


def test_a_pass_of_many_tasks_is_one_span_from_its_start_to_its_last_end():
    """F0 opens at 1 s and its last ``end`` finishes at 4 s; the TP collective inside it and
    the plain task keep their own times; unlabelled and zero-length tasks are left out."""
    labels = [("r0 s0", "F0 start"), ("tp r0 s0", "l0.f1"), ("", ""), ("r0 s0", "F0 end"),
              ("r0 s0", "F0 end"), ("r0 s0", "optimizer"), ("dp s0", "empty")]  # fmt: skip
    start = np.array([1.0, 1.5, 2.0, 3.0, 3.0, 4.0, 5.0])
    finish = np.array([1.0, 2.5, 3.0, 3.0, 4.0, 4.5, 5.0])
    assert graph_intervals(labels, start, finish) == [
        ("r0 s0", "F0", 1.0, 4.0), ("tp r0 s0", "l0.f1", 1.5, 2.5), ("r0 s0", "optimizer", 4.0, 4.5)]
    events = graph_trace(labels, start, finish, {"gpu0->nic0": [(1.0, 1), (2.0, 0)]})["traceEvents"]
    spans = [(e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"]
    assert spans == [(0, "F0", 1e6, 3e6), (1, "l0.f1", 1.5e6, 1e6), (0, "optimizer", 4e6, 0.5e6)]


def test_a_stage_whose_tp_crosses_the_nics_shows_its_passes_and_tp_collectives(tmp_path):
    """TP 8x2 over two nodes: each pass runs as its program's tasks (so its flows meet the
    pipeline's), drawn as one span per micro-batch pass and one event per TP collective of
    the stage's first group; the last event ends with the iteration."""
    model = ModelConfig("tiny", hidden=1024, heads=16, layers=2, batch=1, seq=1024)
    path = tmp_path / "t.json"
    prediction = simulate_job("ib-cluster:4x8", model, tp=(8, 2), pp=2, dp=1, micro_batch=1,
                              global_batch=4, trace=str(path))  # fmt: skip
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"r0 s0", "r0 s1", "tp r0 s0", "tp r0 s1", "busiest links"} <= names
    spans = [e for e in events if e["ph"] == "X"]
    passes = [e["name"] for e in spans if e["cat"] == "r0" and e["name"][0] in "FB"]
    assert sorted(passes) == sorted(f"{k}{m}" for k in "FB" for m in range(4) for _ in range(2))
    assert {"l0.f1", "l0.f1_bwd"} <= {e["name"] for e in spans if e["cat"] == "tp"}
    end_us = max(e["ts"] + e["dur"] for e in spans)
    assert end_us == pytest.approx(prediction.iteration_time_s * 1e6, rel=1e-9)
