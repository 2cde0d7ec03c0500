"""Reading Kineto traces: the committed CPU trace of the validation layer, a GPU-style trace
made by hand, and traces that are not traces."""

import gzip
import json
from pathlib import Path

import pytest

from atpsim.calibrate.trace.reader import read_trace
from atpsim.errors import AtpsimError

TRACE = Path(__file__).parent / "data" / "trace.1x2.c1.rank0.json"


def test_committed_trace_has_every_gemm_and_collective_of_the_layer_per_step():
    """h=256, 8 heads, b=4, s=128 on DeviceMesh(1, 2), one chunk: per step 6 forward GEMMs
    (QKV, scores, context, output, FC1, FC2) and 12 backward (4 linears x dgrad, wgrad; 4
    attention); 10 collectives, those on mesh dimension 2 (size 1 has none): forward LN
    statistics x2, f1, f3 and the attention gather; backward LN statistics x2, the f2 and f4
    dgrad all-reduces and the scatter's all-gather (atpsim.parallel.atp)."""
    trace = read_trace(TRACE)
    assert len(trace.step_s) == 2 and not trace.gpu
    assert all(0.001 < s < 10 for s in trace.step_s)
    for step in (0, 1):
        ops = [o for o in trace.ops if o.step == step]
        gemms = [o for o in ops if o.kind == "gemm"]
        assert [o.phase for o in gemms].count("fwd") == 6 and len(gemms) == 18
        comms = [o for o in ops if o.kind == "comm"]
        assert len(comms) == 10 and {o.collective for o in comms} == {"all_reduce", "all_gather"}
    qkv = next(o for o in trace.ops if o.kind == "gemm")
    assert qkv.gemm == (1, 512, 768, 128)  # T = 4 x 128 tokens, 3h/d1 out, h/d2 in
    stats = next(o for o in trace.ops if o.kind == "comm")
    assert stats.nbytes == 512 * 8  # LayerNorm statistics: 2 fp32 per token
    assert trace.metadata["atpsim_layer"]["d2"] == 2


def test_gzipped_trace_reads_the_same(tmp_path):
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(TRACE.read_bytes()))
    assert read_trace(packed).ops == read_trace(TRACE).ops


def _kineto(events, **top):
    return {"schemaVersion": 1, "traceEvents": events, **top}


def _x(name, cat, ts, dur, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}


def test_gpu_kernels_take_shapes_and_phase_from_the_operator_that_launched_them(tmp_path):
    events = [
        _x("ProfilerStep#0", "user_annotation", 0, 1000),
        _x("aten::mm", "cpu_op", 10, 20, **{"External id": 7, "Input Dims": [[64, 32], [32, 16]],
                                            "Input type": ["c10::BFloat16"] * 2}),
        _x("aten::softmax", "cpu_op", 40, 10, **{"External id": 8, "Input Dims": [[4, 8, 8], []]}),
        _x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 500, 50),
        _x("nccl:all_reduce", "user_annotation", 600, 5),
        _x("c10d::allreduce_", "cpu_op", 601, 3, **{"External id": 9, "Input Dims": [[[64, 16]]],
                                                   "Input type": ["c10::BFloat16"]}),
        _x("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "kernel", 100, 30, tid=7,
           **{"External id": 7}),
        _x("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4>", "kernel", 140, 5,
           tid=7, **{"External id": 8}),
        _x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", 700, 80, tid=8,
           **{"External id": 9}),
    ]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(_kineto(events)))
    trace = read_trace(path)
    assert trace.gpu
    gemm, softmax, comm = trace.ops
    assert (gemm.kind, gemm.gemm, gemm.phase) == ("gemm", (1, 64, 16, 32), "fwd")
    assert gemm.dur_s == pytest.approx(30e-6)
    assert (softmax.kind, softmax.elements) == ("memory", 256)
    assert (comm.kind, comm.collective, comm.phase, comm.nbytes) == ("comm", "all_reduce", "bwd",
                                                                     64 * 16 * 2)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not a JSON trace"),
        (b"\x89PNG\r\n", "not a JSON trace"),
        (json.dumps({"events": []}).encode(), "without a 'traceEvents' list"),
        (json.dumps([1, 2]).encode(), "without a 'traceEvents' list"),
        (json.dumps(_kineto([_x("my_python_range", "python_function", 0, 5)])).encode(),
         "no GEMM, memory-bound or collective ops"),
    ],
)
def test_foreign_or_corrupt_files_are_one_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(AtpsimError, match=message) as caught:
        read_trace(path)
    assert str(path) in caught.value.format() and "\n" not in caught.value.format()
