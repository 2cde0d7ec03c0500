"""The SUMMA (2D / 2.5D) layer program: Table 2's FLOPs over all ranks, the bytes of each
SUMMA step for a tiny case derived by hand, the grid's groups, and on a non-blocking switch
with free compute the step time equals the sum of the collectives' closed forms."""

import networkx as nx
import pytest

from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.models import MODEL_PRESETS, ModelConfig, model_preset
from atpsim.engine.step.run import _comm_timer
from atpsim.engine.step.scheduler import simulate_step
from atpsim.errors import AtpsimError
from atpsim.parallel.atp import program_summary
from atpsim.parallel.grid import Grid
from atpsim.parallel.summa import build_summa_program
from atpsim.program import CommOp
from atpsim.topology.graph import Topology

TABLE2_TFLOPS_2_40 = {"M1": 2.625, "M2": 9.75, "M3": 37.5, "M4": 83.25}
TINY = ModelConfig("tiny", hidden=8, heads=2, layers=1, batch=2, seq=4)


@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
@pytest.mark.parametrize("q, depth, chunks", [(4, 1, 1), (2, 2, 1), (2, 1, 1), (2, 1, 2), (1, 1, 4)])
def test_flops_summed_over_ranks_are_table_2(name, q, depth, chunks):
    model = model_preset(name)
    summary = program_summary(build_summa_program(model, q, depth, chunks), ranks=q * q * depth)
    assert summary["gemm_flops_total"] / 2**40 == pytest.approx(TABLE2_TFLOPS_2_40[name], rel=1e-12)


def test_tiny_forward_summa_steps_hand_derived():
    """TINY on Grid(2, 1): T = 2·4 = 8 tokens, a rank holds 8/2 = 4 rows. QKV (k = 8, n = 24):
    X block 4 x 8/2 fp16 = 32 B broadcast on the rows (dim 2), W block 8/2 x 24/2 fp16 = 96 B on
    the columns (dim 1), step t rooted at position t, then GEMM [4, 4] x [4, 12]."""
    tasks = build_summa_program(TINY, 2).tasks
    qkv = [t.op for t in tasks if t.op.name.startswith("l0.qkv_") and t.phase == "fwd"]
    assert [(op.name, op.collective if isinstance(op, CommOp) else op.kind) for op in qkv] == [
        ("l0.qkv_x0", "broadcast"), ("l0.qkv_w0", "broadcast"), ("l0.qkv_s0", "gemm"),
        ("l0.qkv_x1", "broadcast"), ("l0.qkv_w1", "broadcast"), ("l0.qkv_s1", "gemm"),
    ]  # fmt: skip
    assert (qkv[0].dim, qkv[0].bytes, qkv[0].root) == (2, 32.0, 0)
    assert (qkv[4].dim, qkv[4].bytes, qkv[4].root) == (1, 96.0, 1)
    assert (qkv[2].m, qkv[2].n, qkv[2].k) == (4, 12, 4)


def test_tiny_backward_bytes_per_linear():
    """Backward FC2 (k = 32, n = 8) on Grid(2, 2), batch 4, seq 2: rows per rank 8/(2·2) = 2; x = 2·16·2 = 64 B,
    w = 16·4·2 = 128 B; per step a broadcast and a reduce of each, then the depth all-reduce
    of the 128 B weight-gradient block."""
    tasks = build_summa_program(ModelConfig("tiny4", hidden=8, heads=2, batch=4, seq=2), 2, 2).tasks
    ops = [t.op for t in tasks if t.op.name.startswith("l0.fc2_") and t.phase == "bwd"]
    comm = [(op.collective, op.dim, op.bytes) for op in ops if isinstance(op, CommOp)]
    step = [("broadcast", 1, 128.0), ("reduce", 2, 64.0), ("broadcast", 2, 64.0), ("reduce", 1, 128.0)]
    assert comm == step + step + [("all_reduce", 3, 128.0)]


def test_grid_groups():
    grid = Grid(2, 2)
    assert grid.groups(1) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert grid.groups(2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert grid.groups(3) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    with pytest.raises(AtpsimError):
        grid.groups(4)


@pytest.mark.parametrize("q, depth, batch, heads", [(2, 2, 2, 2), (3, 1, 4, 2)])
def test_rejects_grids_the_model_does_not_split_over(q, depth, batch, heads):
    model = ModelConfig("m", hidden=12, heads=heads, batch=batch, seq=4)
    with pytest.raises(AtpsimError, match="divisible"):
        build_summa_program(model, q, depth)


def _switch(p, bandwidth_Bps=100e9, latency_s=1e-6):
    g = nx.Graph()
    g.add_node("sw", kind="switch")
    for r in range(p):
        g.add_node(f"g{r}", kind="gpu", rank=r)
        g.add_edge(f"g{r}", "sw", kind="custom", bandwidth_Bps=bandwidth_Bps, latency_s=latency_s)
    return Topology(f"switch{p}", g)


@pytest.mark.parametrize("q, depth", [(2, 1), (2, 2), (3, 1)])
def test_free_compute_on_a_switch_takes_the_closed_form(q, depth):
    """With compute free and one chunk every op waits for the previous one, so the step is
    the sum over collectives of the ring closed form (alpha = 2 µs: up and down link; B =
    100 GB/s; groups are link-disjoint on a non-blocking switch)."""
    model = ModelConfig("m", hidden=48, heads=6, batch=depth * q, seq=8)
    program = build_summa_program(model, q, depth)
    grid = Grid(q, depth)
    timeline = simulate_step(program, grid.size, lambda op: 0.0, _comm_timer(_switch(grid.size), grid, "ring"))
    expected = sum(
        collective_time_s(op.collective, "ring", grid.dim_size(op.dim), op.bytes, 100e9, 2e-6)
        for op in program.comm_ops()
    )
    assert timeline.step_time_s == pytest.approx(expected, rel=1e-9)
