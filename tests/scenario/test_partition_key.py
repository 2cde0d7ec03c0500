"""``parallelism.partition`` in a job scenario (issue 24): its forms, the points it makes (an
even pipeline's key as before), a point of each run, and every bad value one line naming
the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from atpsim.api.job_point import simulate_job_point
from atpsim.cli import main
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep

#: GPT-3 125M (12 layers) on 8 GPUs: TP 2 x 4 stages, one replica.
JOB: dict[str, Any] = {
    "name": "uneven",
    "topology": "ib-cluster:1x8",
    "model": "gpt3-125m",
    "parallelism": {"tp": [[2, 1]], "pp": 4, "global_batch": 8, "sequence_parallel": True,
                    "network": "isolated"},
}  # fmt: skip


def scenario(tmp_path: Path, **keys: Any) -> Path:
    data = yaml.safe_load(yaml.safe_dump(JOB))
    data["parallelism"].update(keys)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_each_form_makes_its_points_and_even_keeps_its_key(tmp_path):
    before = expand_sweep(load_scenario(scenario(tmp_path)))
    points = expand_sweep(load_scenario(scenario(tmp_path, partition=["even", "auto", [2, 4, 4, 2]])))
    assert [p.partition for p in points] == ["even", "auto", (2, 4, 4, 2)]
    assert len(before) == 1 and points[0].key() == before[0].key()
    assert "partition" not in points[0].as_dict()
    assert points[1].as_dict()["partition"] == "auto"
    assert points[2].as_dict()["partition"] == [2, 4, 4, 2]
    assert len({p.key() for p in points}) == 3
    single = expand_sweep(load_scenario(scenario(tmp_path, partition=[2, 4, 4, 2])))
    assert [p.partition for p in single] == [(2, 4, 4, 2)] and single[0].key() == points[2].key()


def test_a_depth_not_dividing_the_layers_runs_with_auto(tmp_path):
    """5 stages of TP 1 for 12 layers: refused with even, a point with auto, which runs and
    whose memory is the busiest stage's of the resolved split."""
    path = scenario(tmp_path, tp=[[1, 1]], pp=5, devices=5, global_batch=10, partition="auto")
    (point,) = expand_sweep(load_scenario(path))
    row = simulate_job_point(point)
    assert row["fits_memory"] and row["iteration_time_s"] > 0


BAD = {
    "unknown name": ({"partition": "balanced"}, "parallelism.partition", "expected even, auto or a list"),
    "negative count": ({"partition": [6, 6, -1, 1]}, "parallelism.partition", "whole layer counts >= 0"),
    "wrong sum": ({"partition": [3, 3, 3, 2]}, "parallelism.partition", "holds 11 layers; expected the model's 12"),
    "wrong length": ({"partition": [6, 6]}, "parallelism.partition", "names 2 stages; expected pp: 2"),
    "one of several": ({"partition": ["auto", [6, 6]]}, "parallelism.partition[1]", "names 2 stages"),
    "virtual stages": ({"partition": "auto", "schedule": "interleaved", "virtual_stages": 3},
                       "parallelism.partition", "with 3 virtual stages"),
    "even not dividing": ({"pp": 5, "devices": 5, "tp": [[1, 1]], "global_batch": 10},
                          "parallelism.pp", "do not split over 5 stages"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_partitions_are_one_line_naming_the_key(tmp_path, monkeypatch, case):
    keys, key, fragment = BAD[case]
    path = scenario(tmp_path, **keys)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{path}: {key}: " in lines[0] and fragment in lines[0], lines[0]
