"""Fitting a measurements folder: the synthetic truth comes back, files are deterministic."""

import pytest
from calibrate_fakes import TRUE_PROFILE, TRUE_BANDWIDTH_Bps, TRUE_LATENCY_s, write_folder

from atpsim.calibrate.machine import fit_folder, fitted_paths
from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.hardware import load_profile
from atpsim.engine.collective import run_collective
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = write_folder(tmp_path_factory.mktemp("fit") / "synthetic")
    return folder, fit_folder(folder)


def test_link_fit_recovers_the_true_star(fitted):
    """The collectives are the closed form on 2 GB/s, 20 us per transfer: exact recovery."""
    _, fit = fitted
    assert fit.link.bandwidth_Bps == pytest.approx(TRUE_BANDWIDTH_Bps, rel=1e-6)
    assert fit.link.latency_s == pytest.approx(TRUE_LATENCY_s, rel=1e-6)
    assert fit.n_ranks == 4


def test_engine_on_the_fitted_star_matches_the_fit(fitted):
    """The written topology is a star: the event engine, every dimension-2 group of
    DeviceMesh(2, 2) at once, reproduces the closed form the fit used (no shared links)."""
    folder, fit = fitted
    topology = load_topology(str(fitted_paths(folder)[0]))
    groups = DeviceMesh(2, 2).groups(2)
    nbytes = 2**20
    result = run_collective(topology, "all_reduce", "ring", groups, nbytes, engine="reference")
    expected = collective_time_s("all_reduce", "ring", 2, nbytes, fit.link.bandwidth_Bps,
                                 fit.link.latency_s)  # fmt: skip
    assert result.time_s == pytest.approx(expected, rel=1e-5)


def test_profile_fit_recovers_overhead_and_rate(fitted):
    """Truth: 10 us per call, asymptote 0.9 x 50 GFLOP/s; the fit ignores the memory roofline
    on its grid, so it lands within a few per cent, and the table makes the measured shapes
    close to exact."""
    folder, fit = fitted
    profile = load_profile(fitted_paths(folder)[1])
    assert profile.launch_overhead_s == pytest.approx(TRUE_PROFILE.launch_overhead_s, rel=0.06)
    assert profile.gemm.model == "table" and profile.gemm.points_dtype == "fp32"
    assert fit.profile.rms_rel_error() < 0.03
    assert profile.memory_bandwidth_Bps == TRUE_PROFILE.memory_bandwidth_Bps


def test_refit_rewrites_identical_files(fitted):
    folder, _ = fitted
    files = sorted((folder / "fitted").iterdir())
    before = {p.name: p.read_bytes() for p in files}
    fit_folder(folder)
    assert {p.name: p.read_bytes() for p in files} == before
    assert {p.name for p in files} == {
        "topology.yaml",
        "hardware.yaml",
        "fit.yaml",
        "residuals.csv",
    }


def test_nothing_to_fit(tmp_path):
    with pytest.raises(AtpsimError, match="no collectives and no GEMMs"):
        fit_folder(tmp_path)


def test_memory_ops_give_the_bandwidth(tmp_path):
    """memory_ops.csv holds every non-GEMM op of the layers timed by the truth (12.8 GB/s,
    10 us per call). These ops move 8-64 KiB, 1-5 us of transfer beside the 10 us overhead,
    so B_eff = sum(bytes) / sum(t - o) inherits the fitted overhead's error (~0.4 us, ~4%)
    about fivefold: within 20% of 12.8 GB/s; the layers still pass."""
    from atpsim.api.calibrate import compare_folder

    folder = write_folder(tmp_path / "mem", memory_ops=True)
    fit = fit_folder(folder)
    assert fit.memory.bandwidth_Bps == pytest.approx(TRUE_PROFILE.memory_bandwidth_Bps, rel=0.2)
    profile = load_profile(fitted_paths(folder)[1])
    effective = profile.memory_bandwidth_Bps * profile.memory_efficiency
    assert effective == pytest.approx(fit.memory.bandwidth_Bps, rel=1e-3)
    for op_class, bandwidth in fit.memory.class_bandwidth_Bps:
        share = profile.memory_efficiency_for(op_class)
        assert profile.memory_bandwidth_Bps * share == pytest.approx(bandwidth, rel=1e-3)
    assert "memory_op" in (folder / "fitted" / "residuals.csv").read_text()
    assert compare_folder(folder).passed
