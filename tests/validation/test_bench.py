"""The benchmarks: option parsing, the GEMM shapes a mesh produces, and tiny real runs whose
CSVs the simulator's measurement reader accepts."""

from __future__ import annotations

import csv
import datetime
import json
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from atpsim.calibrate.measurements.folder import read_measurements
from atpsim.compute.models import ModelConfig
from validation.bench import collectives, gemm, layer, memory_ops
from validation.bench.common import mesh_list, parse_bytes

WORLD = 2


def test_parse_bytes_uses_binary_suffixes_like_nccl_tests() -> None:
    assert [parse_bytes(t) for t in ("4096", "64K", "16M", "1G", "2KiB")] == [
        4096,
        65536,
        2**24,
        2**30,
        2048,
    ]


def test_mesh_list_and_sizes() -> None:
    assert mesh_list("4x1, 2x2") == [(4, 1), (2, 2)]
    assert collectives.sizes(1024, 16384, 4) == [1024, 4096, 16384]


def test_gemm_shapes_of_the_layer_on_a_mesh() -> None:
    """h=32, heads=4, b=2, s=8 on 4 ranks, one chunk: on DeviceMesh(2, 2) the QKV forward
    GEMM is [b·s, h/d2] x [h/d2, 3h/d1] = (m, n, k) (16, 48, 16); on DeviceMesh(4, 1) a rank
    holds heads/4 = 1 head of each of b = 2 samples, so the attention scores are a batch of 2
    GEMMs [s, d] x [d, s] = (8, 8, 8)."""
    model = ModelConfig("tiny", 32, 4, batch=2, seq=8, dtype="fp32")
    shapes = gemm.layer_gemms(model, 4, [1])
    assert "2x2 c1 qkv" in shapes[(16, 48, 16, 1)]
    assert "4x1 c1 attn_scores" in shapes[(8, 8, 8, 2)]


def _header(path: Path) -> tuple[str, ...]:
    with path.open() as file:
        return tuple(next(csv.reader(file)))


def test_gemm_benchmark_writes_its_csv_and_machine(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--world-size", "2", "--hidden", "32", "--heads", "4", "--batch", "2",
            "--seq", "8", "--chunks", "1", "--reps", "2", "--warmup", "1", "--shapes", "64,64,64"]  # fmt: skip
    assert gemm.main(argv) == 0
    assert _header(tmp_path / "gemm.csv") == gemm.COLUMNS
    rows = list(csv.DictReader((tmp_path / "gemm.csv").open()))
    extra = next(r for r in rows if r["ops"] == "extra")
    assert float(extra["flops"]) == 2 * 64**3
    machine = json.loads((tmp_path / "gemm.machine.json").read_text())
    assert machine["world_size"] == 1 and machine["command"].startswith(
        "python -m validation.bench.gemm"
    )


def test_gemm_benchmark_refuses_fp8_without_a_gpu(tmp_path: Path) -> None:
    """FP8 GEMMs run on a GPU's FP8 tensor cores only: on a CPU, one line before any process
    group is made (the option itself parses)."""
    argv = ["--out", str(tmp_path), "--dtype", "fp8", "--world-size", "1", "--hidden", "32",
            "--heads", "4", "--batch", "2", "--seq", "8", "--chunks", "1"]  # fmt: skip
    assert gemm.parser().parse_args(argv).dtype == "fp8"
    with pytest.raises(SystemExit, match="FP8 GEMMs need a GPU"):
        gemm.main(argv)
    assert not dist.is_initialized()


def _worker(rank: int, store_path: str, out: str) -> None:
    store = dist.FileStore(store_path, WORLD)
    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD, timeout=timeout)
    collectives.main(
        ["--out", out, "--min-bytes", "1K", "--max-bytes", "4K", "--reps", "2", "--warmup", "1"]
    )
    dist.init_process_group(
        "gloo", store=dist.PrefixStore("layer", store), rank=rank, world_size=WORLD
    )
    layer.main(["--out", out, "--hidden", "32", "--heads", "4", "--batch", "2", "--seq", "8",
                "--reps", "2", "--warmup", "1"])  # fmt: skip


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        mp.spawn(
            _worker, args=(str(folder / "store"), str(folder / "out")), nprocs=WORLD, join=True
        )
    return folder / "out"


def test_collectives_benchmark_rows(bench_out: Path) -> None:
    rows = list(csv.DictReader((bench_out / "collectives.csv").open()))
    assert _header(bench_out / "collectives.csv") == collectives.COLUMNS
    # meshes (2, 1) and (1, 2), one dimension of size 2 each, two ops, sizes 1K and 4K
    assert [(r["d1"], r["d2"], r["dim"], r["op"], r["bytes"]) for r in rows][:3] == [
        ("2", "1", "1", "all_reduce", "1024"),
        ("2", "1", "1", "all_reduce", "4096"),
        ("2", "1", "1", "all_gather", "1024"),
    ]
    assert len(rows) == 8 and all(float(r["time_s"]) > 0 for r in rows)


def test_layer_benchmark_rows(bench_out: Path) -> None:
    rows = list(csv.DictReader((bench_out / "layer.csv").open()))
    assert _header(bench_out / "layer.csv") == layer.COLUMNS
    assert [(r["d1"], r["d2"], r["chunks"]) for r in rows] == [
        ("2", "1", "1"),
        ("2", "1", "2"),
        ("1", "2", "1"),
        ("1", "2", "2"),
    ]


def test_atpsim_reads_the_benchmark_folder(bench_out: Path, tmp_path: Path) -> None:
    argv = ["--out", str(bench_out), "--world-size", "2", "--hidden", "32", "--heads", "4", "--batch", "2",
            "--seq", "8", "--reps", "1", "--warmup", "0"]  # fmt: skip
    gemm.main(argv)
    memory_ops.main(argv)
    measurements = read_measurements(bench_out)
    assert len(measurements.collectives) == 8 and len(measurements.layers) == 4
    assert measurements.gemms and measurements.machine["backend"] == "gloo"
    assert {s.op_class for s in measurements.memory_ops} >= {"softmax", "gelu_bwd", "layernorm"}


def test_memory_op_shapes_and_bytes_are_atpsims() -> None:
    """h=32, heads=4, b=2, s=8, fp32 (B = 4) on 2 ranks, one chunk: DeviceMesh(1, 2) splits the
    hidden size, so LayerNorm runs as statistics ([16, 16] at B per element) and apply (2B);
    DeviceMesh(2, 1) runs one LayerNorm on [b·s, h] = [16, 32] (2B = 8 bytes per element) and
    GeLU on [16, 4h/d1] = [16, 64]; the attention probabilities of a rank are
    b·heads/2 = 4 blocks of [s, s] (softmax 2B, dropout 2B + 1 = 9 bytes per element)."""
    model = ModelConfig("tiny", 32, 4, batch=2, seq=8, dtype="fp32")
    cases = {(c.name, c.shape): (c.bytes_moved / c.elements, uses)
             for c, uses in memory_ops.layer_cases(model, 2, [1]).items()}  # fmt: skip
    assert cases[("ln1_stats", (16, 16))] == (4, ["1x2 c1"])
    assert cases[("ln1_apply", (16, 16))] == (8, ["1x2 c1"])
    assert cases[("ln1", (16, 32))] == (8, ["2x1 c1"])
    assert cases[("fc1_bias_gelu", (16, 64))] == (8, ["2x1 c1"])
    assert cases[("attn_dropout", (4, 8, 8))] == (9, ["2x1 c1", "1x2 c1"])
    assert memory_ops.forward_name("ln2_bwd_apply") == "ln_apply"


def test_append_adds_a_runs_rows_and_keeps_the_earlier_commands(tmp_path: Path) -> None:
    """Two runs of the memory-op benchmark (with a 1 MiB cache flush before each repetition),
    the second with --append: twice the rows, both commands kept, one sample per op."""
    argv = ["--out", str(tmp_path), "--world-size", "1", "--hidden", "32", "--heads", "4",
            "--batch", "2", "--seq", "8", "--chunks", "1", "--reps", "1", "--warmup", "0",
            "--flush", "1M"]  # fmt: skip
    assert memory_ops.main(argv) == 0
    first = list(csv.DictReader((tmp_path / "memory_ops.csv").open()))
    assert memory_ops.main([*argv, "--append"]) == 0
    both = list(csv.DictReader((tmp_path / "memory_ops.csv").open()))
    assert len(both) == 2 * len(first) and both[: len(first)] == first
    runs = json.loads((tmp_path / "memory_ops.machine.json").read_text())["runs"]
    assert len(runs) == 2 and runs[1]["command"].endswith("--append")
    assert len(read_measurements(tmp_path, "min").memory_ops) == len(first)


def test_an_op_is_timed_after_its_flush_and_behind_a_spin_on_a_gpu(monkeypatch) -> None:
    """time_reps flushes before each timed call (after any barrier) and, timing one process's
    op, queues keep_gpu_busy's spin so a GPU op's time excludes the host's launch latency."""
    import torch

    from validation.bench import common

    calls: list[str] = []
    monkeypatch.setattr(common, "keep_gpu_busy", lambda device: calls.append("spin"))
    times = common.time_reps(lambda: calls.append("op"), torch.device("cpu"), warmup=1, reps=2,
                             barrier=False, prepare=lambda: calls.append("flush"))  # fmt: skip
    assert calls == ["op", "flush", "spin", "op", "flush", "spin", "op"] and len(times) == 2


def test_keep_gpu_busy_spins_on_a_gpu_only(monkeypatch) -> None:
    import torch

    from validation.bench.common import LAUNCH_COVER_CYCLES, keep_gpu_busy

    slept: list[int] = []
    monkeypatch.setattr(torch.cuda, "_sleep", slept.append)
    keep_gpu_busy(torch.device("cpu"))
    assert slept == []
    keep_gpu_busy(torch.device("cuda", 0))
    assert slept == [LAUNCH_COVER_CYCLES]
