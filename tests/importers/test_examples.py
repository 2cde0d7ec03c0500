"""The committed examples/ (a Megatron-LM launch script, a NeMo recipe, a DeepSpeed config, a
Hugging Face config.json): each imports into the job its file describes, with the published
architecture of its model, every value traced to the line that says it; the DeepSpeed example
and a small Hugging Face job run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from atpsim.api import import_job, imported_yaml, model_preset
from atpsim.cli import main
from atpsim.importers.trace import INPUT, NOT_MODELLED, UNKNOWN
from atpsim.results.io import read_results
from tests.importers.conftest import comment_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "megatron": ("examples/megatron-gpt3-175b.sh", {}),
    "nemo": ("examples/nemo-llama3-70b.yaml", {}),
    "deepspeed": ("examples/deepspeed-zero1.json",
                  {"model": "gpt3-13b", "topology": "ib-cluster:64x8,generation=h100", "tp": 8}),
    "hf": ("examples/hf-llama3-8b-config.json",
           {"gpus": 8, "tp": 8, "global_batch": 64, "seq": 8192}),
}  # fmt: skip


@pytest.fixture(autouse=True)
def at_the_root(monkeypatch):
    """Paths as the README writes them (examples/...), so that traces read examples/x:7."""
    monkeypatch.chdir(ROOT)


def example(kind: str, check: bool = True):
    path, options = EXAMPLES[kind]
    job = import_job(kind, path, check=check, **options)
    return job, yaml.safe_load(imported_yaml(job))


def test_megatron_example_is_gpt3_175b_as_launched():
    job, scenario = example("megatron")
    model, layout, gpt3 = scenario["model"], scenario["parallelism"], model_preset("gpt3-175b")
    assert (model["layers"], model["hidden"], model["heads"]) == (gpt3.layers, gpt3.hidden, gpt3.heads)
    assert (model["seq"], model["vocab"], model["dtype"]) == (2048, 51200, "bf16")
    assert (layout["devices"], layout["tp"], layout["pp"], layout["dp"]) == (1024, [[8, 1]], 16, 8)
    assert (layout["micro_batch"], layout["global_batch"]) == (1, 1536)
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (True, "selective", 1)
    assert scenario["topology"] == "ib-cluster:128x8,generation=h100"
    text = imported_yaml(job)
    assert comment_of(text, "model.hidden") == "from --hidden-size 12288 (examples/megatron-gpt3-175b.sh:7)"
    warnings = job.warnings()
    assert any(w.startswith("--use-flash-attn (examples/megatron-gpt3-175b.sh:") for w in warnings)
    assert not job.of_kind(UNKNOWN)


def test_nemo_example_is_llama3_70b_in_its_layout():
    job, scenario = example("nemo")
    model, layout, llama = scenario["model"], scenario["parallelism"], model_preset("llama3.1-70b")
    assert (model["layers"], model["hidden"], model["heads"], model["kv_heads"], model["ffn_hidden"]) \
        == (llama.layers, llama.hidden, llama.heads, llama.kv_heads, llama.ffn_hidden)
    assert (model["ffn"], model["tie_embeddings"], model["seq"]) == ("swiglu", False, 8192)
    assert model["vocab"] == 128512  # 128,256 padded to a multiple of 128 x TP 4
    assert (layout["devices"], layout["tp"], layout["pp"], layout["cp"], layout["dp"]) == (512, [[4, 1]], 4, 2, 16)
    assert (layout["schedule"], layout["virtual_stages"]) == ("interleaved", 5)
    assert layout["order"] == ["tp", "cp", "dp", "pp"]
    flagged = {f.origin.text.split(":")[0] for f in job.of_kind(NOT_MODELLED)}
    assert {"model.normalization", "model.use_flash_attention", "model.position_embedding_type"} <= flagged
    assert not job.of_kind(UNKNOWN)


def test_deepspeed_example_is_zero1_for_gpt3_13b():
    job, scenario = example("deepspeed")
    layout = scenario["parallelism"]
    assert scenario["model"] == {"name": "gpt3-13b", "preset": "gpt3-13b", "dtype": "bf16"}
    assert (layout["devices"], layout["dp"], layout["micro_batch"], layout["global_batch"]) == (512, 64, 1, 1024)
    assert (layout["zero"], layout["recompute"]) == (1, "full")
    assert not job.of_kind(UNKNOWN)


def test_hf_example_is_llama3_8b():
    job, scenario = example("hf")
    model, llama = scenario["model"], model_preset("llama3.1-8b")
    assert (model["layers"], model["hidden"], model["heads"], model["kv_heads"], model["ffn_hidden"]) \
        == (llama.layers, llama.hidden, llama.heads, llama.kv_heads, llama.ffn_hidden)
    assert (model["vocab"], model["tie_embeddings"], model["ffn"]) == (128256, False, "swiglu")
    assert not job.of_kind(UNKNOWN)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_traced_line_says_what_its_trace_says(kind):
    """Each origin's line of the input holds the flag or key the origin names: the traces point
    at the right lines."""
    job, _ = example(kind, check=False)
    lines = (ROOT / EXAMPLES[kind][0]).read_text().splitlines()
    origins = [o for item in (*job.model.values(), *job.parallelism.values(), job.topology)
               for o in item.origins] + [f.origin for f in job.findings]  # fmt: skip
    checked = 0
    for origin in origins:
        if origin.kind != INPUT or origin.line is None:
            continue
        name = origin.text.split()[0].split("=")[0].rstrip(":").split(".")[-1]
        assert name.strip('"') in lines[origin.line - 1], (origin, lines[origin.line - 1])
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_value_carries_its_origin(kind):
    job, _ = example(kind, check=False)
    text = imported_yaml(job)
    values = [line for line in text.splitlines() if line.startswith("  ") and ": " in line]
    assert values and all("  # " in line for line in values)


def test_deepspeed_example_runs(tmp_path):
    out = tmp_path / "job.yaml"
    path, options = EXAMPLES["deepspeed"]
    runner = CliRunner()
    result = runner.invoke(main, ["import", "deepspeed", path, "--model", options["model"], "-t",
                                  options["topology"], "--tp", "8", "-o", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["n_devices"], row["dp"], row["recompute"], row["zero"]) == (512, 64, "full", 1)


def test_hf_example_runs_as_a_small_job(tmp_path):
    out = tmp_path / "job.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["import", "hf", EXAMPLES["hf"][0], "--gpus", "8", "--tp", "8",
                                  "--global-batch", "8", "--seq", "2048", "-o", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((ROOT / EXAMPLES["hf"][0]).read_text())["num_hidden_layers"] == 32
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["layers"], row["hidden"], row["seq"]) == (32, 4096, 2048)
