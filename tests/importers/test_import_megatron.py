"""`atpsim import megatron`: a Megatron-LM command line as a job scenario, every value traced to
its line, Megatron-LM's defaults and rules where the command line leaves a value out."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from atpsim.api import AtpsimError, import_job, imported_yaml
from atpsim.cli import main
from atpsim.importers.cmdline import read_script
from atpsim.importers.trace import IGNORED, NOT_MODELLED, UNKNOWN
from atpsim.results.io import read_results
from tests.importers.conftest import comment_of, imported

#: A GPT-3 1.3B (Brown et al. Table 2.1: 24 layers, d_model 2048, d_head 128 -> 16 heads) on
#: two 8-GPU nodes: small enough to simulate in a test.
SMALL = """#!/bin/bash
NODES=2
MODEL=(--num-layers 24 --hidden-size 2048
       --num-attention-heads 16 --seq-length 2048)
torchrun --nnodes $NODES --nproc_per_node 8 pretrain_gpt.py \\
    "${MODEL[@]}" \\
    --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 \\
    --micro-batch-size 1 --global-batch-size 16 \\
    --tokenizer-type GPT2BPETokenizer --bf16 --sequence-parallel \\
    --use-distributed-optimizer --recompute-granularity selective \\
    --lr 1e-4 --use-flash-attn --frobnicate 3
"""

#: The required flags alone, as an argument file (no launcher).
MINIMAL = """--num-layers 24 --hidden-size 4096 --num-attention-heads 32
--seq-length 4096 --micro-batch-size 2 --vocab-size 32000
"""


def test_each_value_is_traced_to_its_line(write):
    job, scenario = imported("megatron", write("small.sh", SMALL))
    model, layout = scenario["model"], scenario["parallelism"]
    assert (model["layers"], model["hidden"], model["heads"], model["seq"]) == (24, 2048, 16, 2048)
    assert layout["devices"] == 16 and layout["tp"] == [[8, 1]] and layout["pp"] == 2
    assert layout["dp"] == 1  # 16 GPUs / (8 x 1 x 2)
    assert (layout["micro_batch"], layout["global_batch"]) == (1, 16)
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (True, "selective", 1)
    assert model["dtype"] == "bf16"
    assert scenario["topology"] == "ib-cluster:2x8,generation=h100"
    text = imported_yaml(job)
    assert comment_of(text, "model.hidden") == "from --hidden-size 2048 (" + str(job.source) + ":3)"
    assert comment_of(text, "model.heads").startswith("from --num-attention-heads 16 (")
    assert ":4)" in comment_of(text, "model.heads")
    # the node count came through a variable: both lines are named
    assert "--nnodes 2" in comment_of(text, "parallelism.devices")
    assert "NODES=2" in comment_of(text, "parallelism.devices")


def test_megatron_defaults_fill_what_the_command_line_leaves_out(write):
    job, scenario = imported("megatron", write("args.txt", MINIMAL), gpus=8)
    model, layout = scenario["model"], scenario["parallelism"]
    assert layout["tp"] == [[1, 1]] and layout["pp"] == 1 and layout["cp"] == 1
    assert layout["dp"] == 8 and layout["global_batch"] == 16  # micro-batch 2 x DP 8
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (False, "none", 0)
    assert layout["schedule"] == "1f1b" and layout["order"] == ["tp", "dp", "pp"]
    assert model["ffn_hidden"] == 4 * 4096 and model["dtype"] == "fp32"
    assert model["tie_embeddings"] is True and "kv_heads" not in model
    assert model["vocab"] == 32000  # 32,000 is a multiple of 128 x TP 1
    assert "default" in job.parallelism["tp"].comment()


def test_swiglu_takes_megatrons_ffn_size_and_gqa_its_groups(write):
    path = write("llama.txt", MINIMAL + "--swiglu --group-query-attention --num-query-groups 8\n")
    _, scenario = imported("megatron", path, gpus=8)
    assert scenario["model"]["ffn"] == "swiglu"
    assert scenario["model"]["ffn_hidden"] == 10880  # int(4 x 4096 x 2/3 / 64) x 64
    assert scenario["model"]["kv_heads"] == 8


def test_query_groups_without_gqa_are_ignored_as_megatron_ignores_them(write):
    job, scenario = imported("megatron", write("mha.txt", MINIMAL + "--num-query-groups 8\n"), gpus=8)
    assert "kv_heads" not in scenario["model"]
    (finding,) = [f for f in job.findings if f.origin.text.startswith("--num-query-groups")]
    assert finding.kind == IGNORED


@pytest.mark.parametrize("extra,tp,vocab", [
    ("--tokenizer-type GPT2BPETokenizer", 8, 51200),   # 50,257 to a multiple of 1,024
    ("--tokenizer-type GPT2BPETokenizer", 1, 50304),   # 50,257 to a multiple of 128
    ("--tokenizer-type NullTokenizer --vocab-size 128256", 8, 129024),  # + EOD, padded
    ("--padded-vocab-size 50000", 8, 50000),
])  # fmt: skip
def test_the_vocabulary_is_padded_as_megatron_pads_it(write, extra, tp, vocab):
    text = MINIMAL.replace("--vocab-size 32000", "") + f"{extra} --tensor-model-parallel-size {tp}\n"
    _, scenario = imported("megatron", write("v.txt", text), gpus=8)
    assert scenario["model"]["vocab"] == vocab


def test_an_unknown_tokenizer_needs_a_vocabulary(write):
    path = write("v.txt", MINIMAL.replace("--vocab-size 32000", "--tokenizer-type HuggingFaceTokenizer"))
    with pytest.raises(AtpsimError) as caught:
        imported("megatron", path, gpus=8)
    assert caught.value.key == "--vocab-size" and "`vocab`" in caught.value.message
    _, scenario = imported("megatron", path, gpus=8, vocab=50257)
    assert scenario["model"]["vocab"] == 50304


def test_virtual_stages_make_the_schedule_interleaved(write):
    text = MINIMAL + "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2\n"
    job, scenario = imported("megatron", write("vp.txt", text), gpus=8)
    assert scenario["parallelism"]["virtual_stages"] == 3  # 24 layers / 4 stages / 2 per chunk
    assert scenario["parallelism"]["schedule"] == "interleaved"


def test_uneven_first_and_last_stages_are_a_partition(write):
    text = MINIMAL + ("--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 5 "
                      "--decoder-last-pipeline-num-layers 5\n")
    _, scenario = imported("megatron", write("part.txt", text), gpus=8)
    assert scenario["parallelism"]["partition"] == [5, 7, 7, 5]


def test_every_flag_left_over_is_named(write):
    job, _ = imported("megatron", write("small.sh", SMALL))
    kinds = {f.origin.text.split()[0]: f.kind for f in job.findings}
    assert kinds["--frobnicate"] == UNKNOWN
    assert kinds["--use-flash-attn"] == NOT_MODELLED
    assert kinds["--lr"] == IGNORED
    warnings = job.warnings()
    assert any(w.startswith("--frobnicate 3 (") and "not understood" in w for w in warnings)
    assert any(w.startswith("--use-flash-attn (") for w in warnings)
    assert any("ignored" in w and "--lr" in w for w in warnings)


def test_a_misspelt_flag_gets_the_nearest_spelling(write):
    job, _ = imported("megatron", write("typo.txt", MINIMAL + "--sequence-paralel\n"), gpus=8)
    (finding,) = [f for f in job.findings if f.kind == UNKNOWN]
    assert "did you mean '--sequence-parallel'" in finding.why


@pytest.mark.parametrize("text,key,line", [
    (MINIMAL.replace("--hidden-size 4096", "--hidden-size abc"), "--hidden-size", 1),
    (MINIMAL.replace("--hidden-size 4096", ""), "--hidden-size", None),
    (MINIMAL + "--recompute-granularity some\n", "--recompute-granularity", 3),
    (MINIMAL + "--bf16 --fp16\n", "--fp16", 3),
])  # fmt: skip
def test_bad_input_names_the_flag_and_line(write, text, key, line):
    path = write("bad.txt", text)
    with pytest.raises(AtpsimError) as caught:
        import_job("megatron", path, gpus=8, check=False)
    assert caught.value.key == key
    assert caught.value.source == (f"{path}:{line}" if line else str(path))


def test_a_scenario_check_failure_names_the_input_flag(write):
    path = write("pp.txt", MINIMAL + "--pipeline-model-parallel-size 16\n--tensor-model-parallel-size 1\n")
    with pytest.raises(AtpsimError) as caught:
        import_job("megatron", path, gpus=16, vocab=32000, topology="ib-cluster:2x8")
    assert caught.value.key == "--pipeline-model-parallel-size"
    assert caught.value.source == f"{path}:3"
    assert "parallelism.pp" in caught.value.message


def test_gpus_that_tp_and_pp_do_not_divide_are_refused(write):
    with pytest.raises(AtpsimError) as caught:
        import_job("megatron", write("a.txt", MINIMAL + "--tensor-model-parallel-size 3\n"), gpus=8,
                   check=False)
    assert caught.value.key == "--tensor-model-parallel-size"


def test_without_a_gpu_count_the_topology_sizes_the_job(write):
    path = write("a.txt", MINIMAL + "--global-batch-size 64\n")
    with pytest.raises(AtpsimError, match="give `gpus`"):
        import_job("megatron", path, check=False)
    job, scenario = imported("megatron", path, topology="ib-cluster:4x8")
    assert (scenario["parallelism"]["devices"], scenario["parallelism"]["dp"]) == (32, 32)
    assert job.parallelism["devices"].comment() == ("from `topology='ib-cluster:4x8'` (atpsim import "
                                                    "option): the topology's 32 GPUs")


def test_the_shell_is_split_as_the_shell_splits_it():
    text = """A=1
ARGS=(
  --x $A   # a comment
  --y "two words"
)
OLD="
  --z 3 \\
  --w 4
"
cd /tmp && python pretrain_gpt.py ${ARGS[@]} $OLD 'q r' ${UNSET:-5}
"""
    script = read_script(text, "s.sh")
    assert script.script.text == "pretrain_gpt.py" and script.script.line == 10
    words = [(w.text, w.line) for w in script.arguments]
    assert words == [("--x", 3), ("1", 3), ("--y", 4), ("two words", 4), ("--z", 7), ("3", 7),
                     ("--w", 8), ("4", 8), ("q r", 10), ("5", 10)]  # fmt: skip
    assert [c.text for c in script.other] == ["cd /tmp"]
    assert script.arguments[1].variable == "A=1" and script.arguments[1].variable_line == 1


def test_an_unclosed_quote_names_its_line():
    with pytest.raises(AtpsimError) as caught:
        read_script("A=1\n--x 'open\n", "s.sh")
    assert caught.value.source == "s.sh:2"


def test_cli_imports_then_runs_the_job(write, tmp_path):
    path = write("small.sh", SMALL)
    out = tmp_path / "job.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["import", "megatron", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "atpsim: warning: --frobnicate 3 (" in result.stderr
    assert "--use-flash-attn" in result.stderr
    text = out.read_text()
    assert "# from --hidden-size 2048 (" in text
    assert "#   --frobnicate 3 (" in text  # listed in the header too
    assert yaml.safe_load(text)["parallelism"]["tp"] == [[8, 1]]
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["tp_mesh"], row["pp"], row["dp"]) == ("8x1", 2, 1)


def test_cli_refuses_an_option_the_command_line_gives_itself(write):
    result = CliRunner().invoke(main, ["import", "megatron", str(write("s.sh", SMALL)), "--tp", "4"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("atpsim: error: --tp: does not apply to a Megatron-LM launch "
                                     "script or argument file, which gives it itself")
