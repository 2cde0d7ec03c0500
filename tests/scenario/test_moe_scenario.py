"""A job scenario's mixture of experts and expert parallelism (issue 24): ``model:`` keys
experts, top_k, moe_every, expert_ffn_hidden, capacity_factor and ``parallelism.ep`` reach the
job; an ``ep: 8`` scenario runs; a dense scenario's points keep their keys; bad values and
impossible layouts are one line naming the key."""

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

#: Mixtral 8x7B cut to 2 layers of 1024 tokens on two 8-GPU A100 nodes: TP 2x1, dp 8.
MOE: dict[str, Any] = {
    "name": "moe-job",
    "topology": "ib-cluster:2x8",
    "model": {"preset": "mixtral-8x7b", "layers": 2, "seq": 1024},
    "parallelism": {"tp": [[2, 1]], "pp": 1, "dp": "auto", "ep": [1, 8], "micro_batch": 1,
                    "global_batch": 16, "sequence_parallel": True},
}  # fmt: skip


def write(tmp_path: Path, data: dict[str, Any], name: str = "moe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _with(model: dict[str, Any] | None = None, **parallelism: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(MOE))
    data["model"].update(model or {})
    data["parallelism"].update(parallelism)
    return data


def test_ep_is_an_axis_and_the_model_keys_reach_the_points(tmp_path):
    data = _with({"top_k": 1, "capacity_factor": 1.25, "expert_ffn_hidden": 7168})
    points = list(expand_sweep(load_scenario(write(tmp_path, data))))
    assert [p.ep for p in points] == [1, 8]
    model = points[0].model
    assert (model.experts, model.router_top_k, model.capacity_factor, model.expert_ffn_size) == (8, 1, 1.25, 7168)
    assert points[1].config().layout.ep == 8 and "ep" in points[1].as_dict()


def test_an_ep_8_scenario_runs_with_less_memory_per_rank(tmp_path):
    """ep 8 holds one expert per layer and rank, ep 1 all eight."""
    rows = {p.ep: simulate_job_point(p) for p in expand_sweep(load_scenario(write(tmp_path, MOE)))}
    assert rows[8]["iteration_time_s"] > 0 and rows[8]["fits_memory"]
    assert rows[8]["memory_per_rank_bytes"] < rows[1]["memory_per_rank_bytes"]


def test_a_dense_scenario_keeps_its_point_keys(tmp_path):
    """ep 1 (the default, or written) leaves the point's key as it was before ep existed."""
    dense = {**_with(), "model": "gpt3-125m"}
    dense["parallelism"] = {k: v for k, v in dense["parallelism"].items() if k != "ep"}
    plain = [p.key() for p in expand_sweep(load_scenario(write(tmp_path, dense, "a.yaml")))]
    dense["parallelism"]["ep"] = 1
    written = [p.key() for p in expand_sweep(load_scenario(write(tmp_path, dense, "b.yaml")))]
    assert plain == written and len(plain) == 1
    assert "ep" not in next(iter(expand_sweep(load_scenario(write(tmp_path, dense, "b.yaml"))))).as_dict()


#: bad input -> (key path, fragment of the message), each one line, exit 2.
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "ep on a dense model": ({**_with(), "model": "gpt3-125m"}, "parallelism.ep[1]", "is dense (model.experts = 0)"),
    "ep not dividing the experts": (_with(ep=3), "parallelism.ep", "ep 3 does not divide the 8 experts"),
    "ep not dividing dp": (_with(ep=8, devices=8), "parallelism.ep", "ep 8 does not divide dp 4"),
    "top_k above the experts": (_with({"top_k": 9}), "model.top_k", "must be at most model.experts (8)"),
    "capacity factor below 1": (_with({"capacity_factor": 0.5}), "model.capacity_factor", "1"),
    "negative experts": (_with({"experts": -2}), "model.experts", ">= 0"),
    "moe_every not dividing a chunk": (_with({"moe_every": 4}), "model.moe_every", "does not divide the 2 layers"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_moe_input_is_one_line_naming_the_key(tmp_path, monkeypatch, case):
    data, key, fragment = BAD[case]
    path = write(tmp_path, data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{path}: {key}: " in lines[0] and fragment in lines[0], lines[0]
