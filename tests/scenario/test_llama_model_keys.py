"""A scenario's ``model:`` keys for Llama-style layers and FP8 (issue 24): kv_heads,
ffn_hidden, ffn, tie_embeddings, vocab and dtype fp8 reach the job; bad values and
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

#: A 2-layer Llama 3.1 8B in fp8 on one 8-GPU H100 node, TP 4x1 or 8x1, one stage.
LLAMA: dict[str, Any] = {
    "name": "llama-job",
    "topology": {"builder": "ib-cluster", "nodes": 1, "gpus_per_node": 8, "generation": "h100"},
    "model": {"preset": "llama3.1-8b", "layers": 2, "dtype": "fp8"},
    "parallelism": {"tp": {"meshes": [[4, 1], [8, 1]]}, "pp": 1, "dp": "auto", "micro_batch": 1,
                    "global_batch": 2},
}  # fmt: skip


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "llama.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_the_model_keys_reach_the_job_points(tmp_path):
    """The preset's shape and vocabulary (128,256) with the fp8 override; a model mapping's
    own vocab replaces the preset's."""
    points = list(expand_sweep(load_scenario(write(tmp_path, LLAMA))))
    assert sorted({(p.tp.d1, p.vocab) for p in points}) == [(4, 128256), (8, 128256)]
    model = points[0].model
    assert (model.n_kv_heads, model.ffn_size, model.ffn, model.tie_embeddings, model.dtype) == (
        8, 14336, "swiglu", False, "fp8")  # fmt: skip
    custom = {**LLAMA, "model": {"hidden": 1024, "heads": 16, "kv_heads": 4, "ffn_hidden": 2816,
                                 "ffn": "swiglu", "tie_embeddings": False, "vocab": 32000,
                                 "layers": 2, "seq": 512, "batch": 1, "dtype": "bf16"}}  # fmt: skip
    custom["parallelism"] = {**LLAMA["parallelism"], "tp": {"meshes": [[4, 1]]}}
    point = next(iter(expand_sweep(load_scenario(write(tmp_path, custom)))))
    assert point.vocab == 32000 and point.model.qkv_out == 1024 + 2 * 256


def test_a_llama_fp8_job_point_runs(tmp_path):
    point = next(iter(expand_sweep(load_scenario(write(tmp_path, LLAMA)))))
    row = simulate_job_point(point)
    assert row["iteration_time_s"] > 0 and row["memory_per_rank_bytes"] > 0


def _with(model: dict[str, Any] | None = None, **parallelism: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(LLAMA))
    data["model"].update(model or {})
    data["parallelism"].update(parallelism)
    return data


#: bad input -> (key path, fragment of the message), each one line, exit 2.
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "kv_heads not dividing heads": (_with({"kv_heads": 5}), "model.kv_heads", "expected a divisor of heads (32)"),
    "unknown ffn": (_with({"ffn": "geglu"}), "model.ffn", "unknown ffn 'geglu'"),
    "tie_embeddings not a boolean": (_with({"tie_embeddings": "no"}), "model.tie_embeddings", "expected true or false"),
    "negative vocab": (_with({"vocab": -1}), "model.vocab", "expected a value >= 0"),
    "TP size not dividing kv_heads": (
        _with(tp={"meshes": [[16, 1]]}, devices=16), "parallelism.tp.meshes[0]",
        "splits model.kv_heads = 8"),
    "fp8 on an A100": (
        {**_with(), "topology": "ib-cluster:1x8"}, "model.dtype",
        "fp8 is not a dtype of hardware profile 'a100-sxm4-80gb'"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_model_input_is_one_line_naming_the_key(tmp_path, monkeypatch, case):
    data, key, fragment = BAD[case]
    if "devices" in data["parallelism"]:
        data["topology"] = {**data["topology"], "nodes": 2}
    path = write(tmp_path, data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{path}: {key}: " in lines[0] and fragment in lines[0], lines[0]
