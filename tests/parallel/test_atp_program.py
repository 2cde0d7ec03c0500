"""The ATP layer program: FLOPs of Table 2, Megatron-LM's four all-reduces at d2 = 1, the
byte totals beside Eq. 2's, and the chunk / dgrad-wgrad issue order of Sections 4.1-4.2."""

import dataclasses

import pytest

from atpsim.compute.models import MODEL_PRESETS, ModelConfig, model_preset
from atpsim.engine.step.scheduler import CommTiming, simulate_step
from atpsim.errors import AtpsimError
from atpsim.parallel.atp import FLAG_UNEVEN_HEADS, build_step_program, program_summary
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.program import CommOp

TABLE2_TFLOPS_2_40 = {"M1": 2.625, "M2": 9.75, "M3": 37.5, "M4": 83.25}


@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
@pytest.mark.parametrize(
    "mesh",
    [DeviceMesh(8, 1), DeviceMesh(4, 2), DeviceMesh(2, 4), DeviceMesh(1, 8), DeviceMesh(16, 1)],
)
@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_flops_summed_over_ranks_are_table_2(name, mesh, chunks):
    model = model_preset(name)
    summary = program_summary(build_step_program(model, mesh, chunks), ranks=mesh.size)
    assert summary["gemm_flops_total"] == pytest.approx(model.layer_flops(), rel=1e-12)
    assert summary["gemm_flops_total"] / 2**40 == pytest.approx(TABLE2_TFLOPS_2_40[name])


def test_flops_scale_with_layers():
    model = dataclasses.replace(model_preset("M1"), layers=3)
    summary = program_summary(build_step_program(model, DeviceMesh(2, 2), 2), ranks=4)
    assert summary["gemm_flops_total"] == pytest.approx(3 * 2.625 * 2**40)


def test_megatron_four_all_reduces_of_bsh():
    """DeviceMesh(8, 1) is Megatron-LM (Section 2.3): all-reduces of b·s·h fp16 elements
    (4·2048·4096·2 B = 64 MiB) after the attention output and FC2 forward, after the FC1 and
    QKV dgrads backward, all on mesh dimension 1; nothing else is communicated."""
    program = build_step_program(model_preset("M2"), DeviceMesh(8, 1), 1)
    comms = [
        (t.phase, t.op.name, t.op.collective, t.op.dim, t.op.bytes)
        for t in program.tasks
        if isinstance(t.op, CommOp)
    ]
    bsh = 4 * 2048 * 4096 * 2
    assert comms == [
        ("fwd", "l0.f2", "all_reduce", 1, bsh),
        ("fwd", "l0.f4", "all_reduce", 1, bsh),
        ("bwd", "l0.f3_bwd", "all_reduce", 1, bsh),
        ("bwd", "l0.f1_bwd", "all_reduce", 1, bsh),
    ]
    names = [t.op.name for t in program.tasks]
    for comm, after in [
        ("l0.f2", "l0.proj"),
        ("l0.f4", "l0.fc2"),
        ("l0.f3_bwd", "l0.fc1_dgrad"),
        ("l0.f1_bwd", "l0.qkv_dgrad"),
    ]:
        assert names[names.index(comm) - 1] == after


@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_megatron_bytes_per_layer_do_not_depend_on_chunks(chunks):
    model = dataclasses.replace(model_preset("M1"), layers=2)
    summary = program_summary(build_step_program(model, DeviceMesh(4, 1), chunks))
    assert summary["comm_bytes"] == {1: {"all_reduce": 2 * 4 * (4 * 2048 * 2048 * 2)}, 2: {}}
    assert summary["comm_count"][1]["all_reduce"] == 2 * 4 * chunks


def _eq2_bytes_per_dim(model: ModelConfig, mesh: DeviceMesh) -> dict[int, float]:
    """Eq. 2's traffic in bytes per rank: 2·L·b·s·(7h/d1 on dimension 2, 2h/d2 on dimension 1)."""
    scale = 2 * model.layers * model.batch * model.seq * model.dtype_bytes
    return {
        1: scale * 2 * model.hidden / mesh.d2 if mesh.d1 > 1 else 0.0,
        2: scale * 7 * model.hidden / mesh.d1 if mesh.d2 > 1 else 0.0,
    }


@pytest.mark.parametrize("mesh", factorizations(8))
def test_bytes_per_dimension_beside_eq2(mesh):
    """Per layer and rank, with u = b·s·dtype bytes:
    Eq. 2:        dimension 1: 4h/d2·u; dimension 2: 14h/d1·u (f1, f3 counted in both passes).
    This program: dimension 1: all-reduce 4h/d2·u (f2, f4 forward; QKV, FC1 dgrads backward);
                  dimension 2: all-reduce (3h + 4h)/d1·u forward + (h + 4h)/d1·u backward
                  (the attention-output and FC2 dgrads), all-gather (h + 3h)/d1·u (gather
                  forward, scatter gradient backward), and 4 LayerNorm statistics all-reduces
                  of 8 bytes per token.
    So dimension 1 agrees with Eq. 2 and dimension 2 differs (12h/d1 + 4h/d1 gathered, vs 14h/d1)."""
    model = model_preset("M2")
    u, h = model.batch * model.seq * model.dtype_bytes, model.hidden
    summary = program_summary(build_step_program(model, mesh, 1))
    dim1, dim2 = summary["comm_bytes"][1], summary["comm_bytes"][2]
    ln_stats = 4 * model.batch * model.seq * 8
    expected_dim1 = {"all_reduce": 4 * h / mesh.d2 * u} if mesh.d1 > 1 else {}
    expected_dim2 = (
        {"all_reduce": 12 * h / mesh.d1 * u + ln_stats, "all_gather": 4 * h / mesh.d1 * u}
        if mesh.d2 > 1
        else {}
    )
    assert dim1 == pytest.approx(expected_dim1)
    assert dim2 == pytest.approx(expected_dim2)
    eq2 = _eq2_bytes_per_dim(model, mesh)
    assert sum(dim1.values()) == pytest.approx(eq2[1])
    if mesh.d2 > 1:
        assert dim2["all_reduce"] - ln_stats == pytest.approx(eq2[2] * 12 / 14)


def test_chunks_interleave_so_compute_overlaps_the_previous_chunk_collective():
    """Figure 8: chunk 1's QKV GEMM is issued after chunk 0's f1 all-reduce and before chunk
    0's attention core, so the compute stream runs it while chunk 0 communicates."""
    program = build_step_program(model_preset("M1"), DeviceMesh(2, 2), 2)
    order = [(t.op.name, t.chunk) for t in program.tasks]
    assert (
        order.index(("l0.f1", 0)) < order.index(("l0.qkv", 1)) < order.index(("l0.attn_scores", 0))
    )
    task = {(t.op.name, t.chunk): t for t in program.tasks}
    assert task[("l0.attn_scores", 0)].deps == (task[("l0.f1", 0)].id,)


def test_wgrad_overlaps_the_dgrad_all_reduce():
    """Section 4.2: dgrad, then its all-reduce, then wgrad, which depends on the gradient
    the dgrad read and not on the all-reduce."""
    program = build_step_program(model_preset("M1"), DeviceMesh(4, 1), 1)
    names = [t.op.name for t in program.tasks]
    i = names.index("l0.fc1_dgrad")
    assert names[i : i + 3] == ["l0.fc1_dgrad", "l0.f3_bwd", "l0.fc1_wgrad"]
    dgrad, comm, wgrad = program.tasks[i : i + 3]
    assert comm.deps == (dgrad.id,)
    assert wgrad.deps == dgrad.deps
    assert program.tasks[i + 3].deps == (comm.id,)


@pytest.mark.parametrize("mesh", [DeviceMesh(4, 1), DeviceMesh(2, 2), DeviceMesh(1, 4)])
@pytest.mark.parametrize("chunks", [1, 2])
def test_program_is_in_topological_order_and_chunks_are_independent(mesh, chunks):
    model = dataclasses.replace(model_preset("M1"), layers=2)
    program = build_step_program(model, mesh, chunks)
    assert [t.id for t in program.tasks] == list(range(len(program.tasks)))
    for task in program.tasks:
        assert all(d < task.id and program.tasks[d].chunk == task.chunk for d in task.deps)
    last_fwd = max(t.id for t in program.tasks if t.phase == "fwd")
    assert all(t.phase == "bwd" for t in program.tasks[last_fwd + 1 :])


def test_chunked_program_has_chunks_times_the_tasks():
    model = model_preset("M2")
    one = build_step_program(model, DeviceMesh(2, 4), 1)
    assert len(build_step_program(model, DeviceMesh(2, 4), 4).tasks) == 4 * len(one.tasks)


def test_uneven_heads_are_split_evenly_and_flagged():
    """M1 has 16 heads; DeviceMesh(4, 8) has 32 ranks: half a head per rank per sample. The
    FLOPs stay exact and the program says so; the GEMM shape is the busiest rank's."""
    model = model_preset("M1")
    program = build_step_program(model, DeviceMesh(4, 8), 1)
    assert program.flags == (FLAG_UNEVEN_HEADS,)
    summary = program_summary(program, ranks=32)
    assert summary["gemm_flops_total"] == pytest.approx(model.layer_flops())
    scores = next(op for op in program.compute_ops() if op.name == "l0.attn_scores")
    assert scores.batch == 2  # 4 samples x 16 heads / 32 ranks
    assert build_step_program(model, DeviceMesh(4, 4), 1).flags == ()


@pytest.mark.parametrize(
    "mesh, chunks, message",
    [
        (DeviceMesh(8, 1), 3, "must be >= 1 and divide the batch"),
        (DeviceMesh(3, 1), 1, "not divisible by d1 = 3"),
    ],
)
def test_bad_splits_are_errors(mesh, chunks, message):
    with pytest.raises(AtpsimError, match=message):
        build_step_program(model_preset("M1"), mesh, chunks)


def _step_time(program, mesh, compute_s, comm_s_per_byte):
    def comm(op):
        groups = mesh.groups(op.dim)
        return CommTiming.of(groups, [op.bytes * comm_s_per_byte] * len(groups))

    return simulate_step(
        program, mesh.size, lambda op: compute_s * op.flops / 1e12 + 1e-6, comm
    ).step_time_s


def test_chunking_hides_communication_on_the_step_simulator():
    """With equal-cost compute and communication, two chunks overlap what one serialises."""
    model, mesh = model_preset("M1"), DeviceMesh(4, 1)
    one = _step_time(build_step_program(model, mesh, 1), mesh, 1e-3, 1e-11)
    two = _step_time(build_step_program(model, mesh, 2), mesh, 1e-3, 1e-11)
    assert two < 0.9 * one


def test_optimizer_step_is_opt_in_and_runs_last():
    """With optimizer_step, one Adam update per layer follows every chunk's backward and
    moves 28 bytes per parameter the rank holds (fp16 mixed precision)."""
    from atpsim.parallel.atp import params_per_rank

    model = dataclasses.replace(model_preset("M1"), layers=2)
    mesh = DeviceMesh(2, 2)
    plain = build_step_program(model, mesh, 2)
    program = build_step_program(model, mesh, 2, optimizer_step=True)
    assert program.tasks[: len(plain.tasks)] == plain.tasks
    adam = program.tasks[len(plain.tasks) :]
    assert [t.op.name for t in adam] == ["l0.adam", "l1.adam"]
    heads = tuple(
        max(t.id for t in plain.tasks if t.chunk == c and t.op.name.endswith("ln1_bwd_apply"))
        for c in (0, 1)
    )
    assert all(t.deps == heads for t in adam)
    per_layer = params_per_rank(dataclasses.replace(model, layers=1), mesh)
    assert adam[0].op.bytes_moved == pytest.approx(28 * per_layer)
