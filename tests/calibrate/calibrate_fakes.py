"""A synthetic measurements folder whose truth is known: the collectives, GEMMs and layers are
what atpsim itself predicts on a star of 4 ranks (2 GB/s, 20 us per transfer) with a CPU-like
profile (50 GFLOP/s asymptote, 10 us per call), so the fit must recover that truth and the
comparison must find (almost) no error."""

import csv
import json

from atpsim.calibrate.fit.link import LinkFit
from atpsim.calibrate.fit.star import star_topology
from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import GemmModel, HardwareProfile
from atpsim.compute.models import ModelConfig
from atpsim.engine.step.run import simulate_des_step
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.custom import build_custom

TRUE_BANDWIDTH_Bps = 2e9
TRUE_LATENCY_s = 20e-6
TRUE_PROFILE = HardwareProfile(
    name="truth",
    peak_flops=(("fp32", 50e9),),
    memory_bandwidth_Bps=12.8e9,
    memory_capacity_bytes=4 * 2**30,
    memory_efficiency=1.0,
    launch_overhead_s=10e-6,
    gemm=GemmModel(model="curve", efficiency_max=0.9, output_half_elements=2000.0, k_half=8.0),
)
MESHES = ((4, 1), (2, 2), (1, 4))
LAYER = dict(hidden=64, heads=4, batch=4, seq=16, dtype="fp32")


def true_topology():
    return build_custom(star_topology(4, LinkFit(TRUE_BANDWIDTH_Bps, TRUE_LATENCY_s, "ring", ())))


def layer_shapes():
    """(m, n, k, batch) of every GEMM the layer programs of MESHES x chunks 1, 2 run."""
    shapes = set()
    for d1, d2 in MESHES:
        for chunks in (1, 2):
            model = ModelConfig("t", layers=1, **LAYER)
            program = build_step_program(model, DeviceMesh(d1, d2), chunks)
            shapes |= {
                (op.m, op.n, op.k, op.batch) for op in program.compute_ops() if op.kind == "gemm"
            }
    return sorted(shapes)


def write_memory_ops(folder):
    """memory_ops.csv: every memory-bound op of the layer programs, timed by the truth."""
    from atpsim.compute.timing import memory_time_s

    ops = set()
    for d1, d2 in MESHES:
        program = build_step_program(ModelConfig("t", layers=1, **LAYER), DeviceMesh(d1, d2), 1)
        ops |= {(op.name, op.bytes_moved) for op in program.compute_ops() if op.kind == "memory"}
    with open(folder / "memory_ops.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "bytes_moved", "dtype", "time_s"])
        for name, moved in sorted(ops):
            w.writerow([name, moved, "fp32", memory_time_s(moved, TRUE_PROFILE)])


def write_folder(folder, *, layer_scale=1.0, memory_ops=False):
    """Write the synthetic folder; *layer_scale* multiplies the measured layer times; with
    *memory_ops* the memory bandwidth comes from a memory_ops.csv, not the description."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "collectives.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "dim", "group_size", "n_groups", "bytes", "time_s_median", "time_s_mean"])
        for dim, p, groups in ((1, 4, 1), (1, 2, 2), (2, 2, 2)):
            for e in range(3, 23, 2):
                t = collective_time_s(
                    "all_reduce", "ring", p, 2**e, TRUE_BANDWIDTH_Bps, TRUE_LATENCY_s
                )
                w.writerow(["all_reduce", dim, p, groups, 2**e, t, t * 1.1])
    shapes = layer_shapes() + [(s, s, s, 1) for s in (8, 32, 128, 256)]
    with open(folder / "gemm.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["m", "n", "k", "batch", "dtype", "time_s", "flops"])
        for m, n, k, b in shapes:
            w.writerow(
                [
                    m,
                    n,
                    k,
                    b,
                    "fp32",
                    gemm_time_s(m, n, k, b, "fp32", TRUE_PROFILE),
                    2 * b * m * n * k,
                ]
            )
    topology = true_topology()
    with open(folder / "layers.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["d1", "d2", "chunks", *LAYER, "fwd_bwd_time_s"])
        for d1, d2 in MESHES:
            for chunks in (1, 2):
                model = ModelConfig("t", layers=1, **LAYER)
                step = simulate_des_step(
                    topology, TRUE_PROFILE, model, DeviceMesh(d1, d2), chunks, "ring"
                )
                w.writerow([d1, d2, chunks, *LAYER.values(), step.step_time_s * layer_scale])
    machine = {"device": "cpu", "cpu_model": "synthetic", "backend": "gloo", "world_size": 4}
    if memory_ops:
        write_memory_ops(folder)
    else:
        machine["memory_bandwidth_Bps"] = TRUE_PROFILE.memory_bandwidth_Bps
    (folder / "machine.json").write_text(json.dumps(machine))
    (folder / "tolerance.yaml").write_text(
        "# synthetic: the truth is the model\nmedian_abs_error: 0.02\n"
    )
    return folder
