"""Deterministic fake points and simulate functions for the sweep runner's tests.

Module-level functions, so they pickle to ProcessPoolExecutor workers.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from atpsim.compute.models import MODEL_PRESETS
from atpsim.parallel.mesh import factorizations
from atpsim.scenario.point import SweepPoint


def make_points(n_devices: int = 8, models: tuple[str, ...] = ("M1", "M2"), chunks=(1, 2)):
    """Every factorization of *n_devices* x *models* x *chunks* on a fake topology."""
    return [
        SweepPoint(
            scenario="fake",
            topology={"preset": "ic3"},
            topology_label="ic3",
            n_devices=n_devices,
            hardware="a100-sxm4-80gb",
            model=MODEL_PRESETS[m],
            tp=mesh,
            chunks=c,
        )
        for m in models
        for mesh in factorizations(n_devices)
        for c in chunks
    ]


def fake_simulate(point: SweepPoint) -> dict[str, Any]:
    """A row computed from the point's parameters alone (with awkward floats on purpose)."""
    h, d1, d2 = point.model.hidden, point.mesh.d1, point.mesh.d2
    compute = point.model.layer_flops() / point.n_devices / 250e12
    comm = 2 * point.model.batch * point.model.seq * h * (7 / (d1 * 3e11) + 2 / (d2 * 3e11))
    exposed = comm / point.chunks
    step = compute + exposed
    flops = point.model.layer_flops() / step / point.n_devices
    return {
        "step_time_s": step,
        "compute_time_s": compute,
        "comm_time_s": comm,
        "exposed_comm_s": exposed,
        "tflops_per_gpu": flops / 1e12,
        "tflops_per_gpu_paper_unit": flops / 2.0**40,
        "comm_over_delta": (14 * d2 + 4 * d1 - 18) / (d1 * d2),
        "group_bw_Bps": 3e11,
        "memory_per_rank_bytes": 12.0 * h * h * 2 / point.n_devices,
        "fits_memory": True,
    }


def failing_simulate(point: SweepPoint) -> dict[str, Any]:
    """Fails on every mesh with d2 == 2; otherwise like :func:`fake_simulate`."""
    if point.mesh.d2 == 2:
        raise ZeroDivisionError("fake failure on d2 == 2")
    return fake_simulate(point)


def slow_simulate(point: SweepPoint) -> dict[str, Any]:
    """Like :func:`fake_simulate` but takes a while (for SIGINT tests)."""
    time.sleep(float(os.environ.get("FAKE_SLEEP_S", "0.2")))
    return fake_simulate(point)


def interrupting_simulate(point: SweepPoint) -> dict[str, Any]:
    """Counts its calls in the file $FAKE_COUNTER (one byte each, appended atomically, so
    worker processes can share it) and raises KeyboardInterrupt from call $FAKE_STOP_AFTER + 1
    on; otherwise like :func:`fake_simulate`."""
    with open(os.environ["FAKE_COUNTER"], "ab") as counter:
        counter.write(b".")
    if calls() > int(os.environ["FAKE_STOP_AFTER"]):
        raise KeyboardInterrupt
    return fake_simulate(point)


def calls() -> int:
    """Calls of :func:`interrupting_simulate` counted so far."""
    path = Path(os.environ["FAKE_COUNTER"])
    return path.stat().st_size if path.exists() else 0


def crashing_simulate(point: SweepPoint) -> dict[str, Any]:
    """Kills its worker process on DeviceMesh(1, 8) (as the kernel's OOM killer would)."""
    if point.mesh.d2 == 8:
        os._exit(9)
    return fake_simulate(point)
