"""Fitting a measurements folder: the synthetic truth comes back, files are deterministic, bad
input names its file and key."""

import pytest
from validate_fakes import TRUE_PROFILE, TRUE_BANDWIDTH_Bps, TRUE_LATENCY_s, write_folder

from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.hardware import load_profile
from atpsim.engine.runner import run_collective
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology
from atpsim.validate.fit import fit_folder, fitted_paths
from atpsim.validate.measurements import read_measurements
from atpsim.validate.settings import read_settings


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
    result = run_collective(topology, "all_reduce", "ring", groups, nbytes, engine="event")
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


def test_repeated_rows_reduce_to_their_median(tmp_path):
    (tmp_path / "g.csv").write_text(
        "m,n,k,dtype,time_s\n8,8,8,fp32,1e-5\n8,8,8,fp32,3e-5\n8,8,8,fp32,2.5e-5\n"
    )
    (gemm,) = read_measurements(tmp_path).gemms
    assert gemm.time_s == pytest.approx(2.5e-5) and gemm.label == "8x8x8 fp32"


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("x.csv", "a,b\n1,2\n", "x.csv: not a collectives"),
        (
            "g.csv",
            "m,n,k,dtype,time_s\n8,8,8,fp32,-1\n",
            "g.csv: row 2.time_s: expected a positive",
        ),
        ("g.csv", "m,n,k,dtype\n8,8,8,fp32\n", "g.csv: time_s: no time column"),
        (
            "c.csv",
            "op,group_size,bytes,time_s\nbcast,2,8,1e-5\n",
            "c.csv: c.csv row 0.op: expected an op",
        ),
        (
            "l.csv",
            "d1,d2,chunks,hidden,heads,batch,seq,dtype,fwd_bwd_time_s\n2,2,0,8,2,2,4,fp32,1\n",
            "l.csv row 0.chunks: expected an integer >= 1",
        ),
    ],
)
def test_bad_tables_name_file_and_key(tmp_path, name, text, expected):
    (tmp_path / name).write_text(text)
    with pytest.raises(AtpsimError, match=expected.replace(".", r"\.")):
        read_measurements(tmp_path)


def test_nothing_to_fit(tmp_path):
    with pytest.raises(AtpsimError, match="no collectives and no GEMMs"):
        fit_folder(tmp_path)


@pytest.mark.parametrize(
    "text, expected",
    [
        (None, "no tolerance.yaml"),
        ("tolerance: 0.2\n", "expected a mapping with key median_abs_error"),
        ("median_abs_error: 0.2\nstatistc: min\n", "statistc: unknown key.*statistic"),
        ("median_abs_error: 0.2\nstatistic: max\n", "statistic: expected one of"),
        ("median_abs_error: -1\n", "expected a fraction > 0"),
    ],
)
def test_tolerance_file_errors(tmp_path, text, expected):
    if text is not None:
        (tmp_path / "tolerance.yaml").write_text(text)
    with pytest.raises(AtpsimError, match=expected):
        read_settings(tmp_path)


def test_memory_ops_give_the_bandwidth(tmp_path):
    """memory_ops.csv holds every non-GEMM op of the layers timed by the truth (12.8 GB/s,
    10 us per call). These ops move 8-64 KiB, 1-5 us of transfer beside the 10 us overhead,
    so B_eff = sum(bytes) / sum(t - o) inherits the fitted overhead's error (~0.4 us, ~4%)
    about fivefold: within 20% of 12.8 GB/s; the layers still pass."""
    from atpsim.validate.compare import compare_folder

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


def test_run_queue_wait_gives_the_error_without_it(tmp_path):
    """Layers measured 25% slow, of which a fifth (0.2 · 1.25 = 0.25 of the truth) was
    recorded as run-queue wait: the error is -20% (1 / 1.25 - 1), and against measured less
    the wait it is ~0. The verdict stays on the measured time."""
    import pandas as pd

    from atpsim.validate.compare import compare_folder, report_markdown

    folder = write_folder(tmp_path / "wait", layer_scale=1.25)
    layers = pd.read_csv(folder / "layers.csv")
    layers["fwd_bwd_run_delay_s_median"] = 0.2 * layers["fwd_bwd_time_s"]
    layers.to_csv(folder / "layers.csv", index=False)
    comparison = compare_folder(folder)
    assert [r.point.run_delay_s for r in comparison.results] == pytest.approx(
        [0.2 * r.point.time_s for r in comparison.results]
    )
    assert comparison.median_abs_error == pytest.approx(0.2, abs=0.02)
    assert comparison.median_abs_error_without_wait == pytest.approx(0.0, abs=0.02)
    assert not comparison.passed
    assert "less its run-queue wait" in report_markdown(comparison)
