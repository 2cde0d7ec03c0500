"""The per-collective overhead and NVSwitch rate measured from the NCCL all-reduce sweep."""

import pytest

from atpsim.calibrate.fit.nccl_overhead import AZURE_A100_ALLREDUCE, MIN_FIT_BYTES, fit_collective
from atpsim.compute.hardware import load_profile
from atpsim.engine.collective import run_collective
from atpsim.topology.spec import load_topology


def test_affine_fit_of_the_azure_sweep():
    """From 8 MiB up: about 0.1 ms per call, then about 220 GB/s of bus bandwidth (7% RMS);
    the fit is exact least squares, so the figures are stable to many digits."""
    fit = fit_collective()
    assert fit.overhead_s == pytest.approx(101.9e-6, rel=1e-3)
    assert fit.bus_Bps == pytest.approx(219.7e9, rel=1e-3)
    assert fit.rms_relative_error < 0.08


def test_an_exact_affine_sweep_is_recovered():
    rows = tuple((n, 1.75 * n / (20e-6 + 1.75 * n / 100e9)) for n in (2**23, 2**26, 2**30))
    fit = fit_collective(rows)
    assert fit.overhead_s == pytest.approx(20e-6) and fit.bus_Bps == pytest.approx(100e9)
    assert fit.rms_relative_error == pytest.approx(0, abs=1e-9)


def test_the_event_backend_with_the_profile_overhead_reproduces_the_sweep():
    """What the step's ``event`` backend charges (bare links, the paper-stack profile's
    collective overhead): the ring on 8 GPUs of one NVSwitch at the fitted bus rate matches
    every measured row from 8 MiB within 15%."""
    fit = fit_collective()
    topology = load_topology({"builder": "nvswitch", "gpus": 8, "gpu_bandwidth_Bps": fit.bus_Bps})
    overhead_s = load_profile("a100-sxm4-80gb-paper-stack").collective_overhead_s
    for nbytes, busbw in AZURE_A100_ALLREDUCE:
        if nbytes < MIN_FIT_BYTES:
            continue
        result = run_collective(topology, "all_reduce", "ring", [list(range(8))], nbytes)
        measured_s = 1.75 * nbytes / busbw
        assert result.time_s + overhead_s == pytest.approx(measured_s, rel=0.15), nbytes


def test_ic3_as_the_step_runs_it_reproduces_the_sweep():
    """IC3 as the step simulator's default backend times it (NCCL on spec links, the a100
    profile): every measured row from 64 MB within 10%, 1-8 MB within 25%."""
    from atpsim.engine.backends import get_backend

    topology = load_topology("ic3")
    for nbytes, busbw in AZURE_A100_ALLREDUCE:
        (time_s,) = get_backend("nccl")(topology, "all_reduce", "auto", [list(range(8))], nbytes)
        tolerance = 0.10 if nbytes >= 64e6 else 0.25
        assert 1.75 * nbytes / time_s == pytest.approx(busbw, rel=tolerance), nbytes
