"""A point's resume key follows the contents of the files it reads (issue 25): a hardware
profile or custom topology named by path is keyed on its bytes, so `--resume` after the file
changes computes the point again on the new file, and keeps it while the file is unchanged;
bundled names read no file and keep their keys (the committed reports' keys)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from atpsim.api.uncertainty import DrawnPoint
from atpsim.api.workloads import WORKLOADS
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.cli import main
from atpsim.compute.models import ModelConfig
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.inputs import file_contents
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.point import SweepPoint
from atpsim.scenario.sweep import expand_sweep
from atpsim.scenario.workload import STEP

ROOT = Path(__file__).resolve().parents[2]
BUNDLED_A100 = Path(str(resources.files("atpsim") / "data" / "hardware" / "a100-sxm4-80gb.yaml"))

SCENARIO = """name: profile-file
topology: ic3
hardware: gpu.yaml
model: M1
parallelism: {devices: 8, meshes: [atp-2]}
mode: analytic
"""


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """The keys of the points simulated (by the real step simulation), in order."""
    simulated: list[str] = []
    real = WORKLOADS[STEP].simulate

    def counting(point):
        simulated.append(point.key())
        return real(point)

    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=counting))
    return simulated


def run_resumed(scenario: Path, out: Path) -> pd.DataFrame:
    args = ["run", str(scenario), "-o", str(out), "--resume", "--no-progress", "-j", "1"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "results.csv")


def test_resume_recomputes_a_point_whose_profile_file_changed(tmp_path, counted):
    profile = tmp_path / "gpu.yaml"
    shutil.copy(BUNDLED_A100, profile)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"

    first = run_resumed(scenario, out)
    assert len(counted) == 1 and first["status"].tolist() == ["ok"]

    again = run_resumed(scenario, out)  # the file as it was: the row is kept
    assert len(counted) == 1
    assert again["point_key"].tolist() == first["point_key"].tolist()

    text = profile.read_text()
    assert "memory_bandwidth_Bps: 2.039e+12" in text
    profile.write_text(text.replace("memory_bandwidth_Bps: 2.039e+12", "memory_bandwidth_Bps: 0.5e+12"))
    changed = run_resumed(scenario, out)  # same path, new bytes: computed again, on them
    assert len(counted) == 2
    assert changed["point_key"].tolist() != first["point_key"].tolist()
    assert changed["step_time_s"].iloc[0] > first["step_time_s"].iloc[0]
    assert len(changed) == 1  # the stale row is not kept beside the new one


def test_a_custom_topology_file_is_keyed_on_its_contents(tmp_path):
    topology = tmp_path / "pair.yaml"
    topology.write_text(
        "nodes: [{name: g0, kind: gpu, rank: 0}, {name: g1, kind: gpu, rank: 1}]\n"
        "links: [{a: g0, b: g1, bandwidth: 100 GB/s, latency: 1 us}]\n"
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: pair\ntopology: pair.yaml\nhardware: a100-sxm4-80gb\nmodel: M1\n"
        "parallelism: {devices: 2, meshes: [atp-1]}\nmode: analytic\n"
    )
    (point,) = expand_sweep(load_scenario(scenario))
    before = point.key()
    assert file_contents(point.topology, point.hardware) == {str(topology): _sha256_16(topology)}
    topology.write_text(topology.read_text().replace("100 GB/s", "50 GB/s"))
    assert point.key() != before
    topology.write_text(topology.read_text().replace("50 GB/s", "100 GB/s"))
    assert point.key() == before  # the key follows the bytes, not when they were written


def _sha256_16(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_bundled_names_read_no_file_and_keep_the_committed_keys():
    folder = ROOT / "reports" / "quickstart"
    points = expand_sweep(load_scenario(folder / "scenario.yaml"))
    assert all(file_contents(p.topology, p.hardware) == {} for p in points)
    saved = set(pd.read_csv(folder / "results.csv")["point_key"].astype(str))
    assert {p.key() for p in points} == saved


def test_a_drawn_point_on_a_fitted_profile_is_keyed_on_its_fit_summary(tmp_path):
    """Draws of a fitted profile come from the fit.yaml beside it: editing that file changes
    the drawn point's key (not the point estimate's); a bundled profile's drawn key is as before."""
    fitted = tmp_path / "fitted"
    shutil.copytree(ROOT / "validation" / "measurements" / "cpu-gloo-2core-2ranks" / "fitted", fitted)
    model = ModelConfig("m", 256, 8, layers=1, batch=4, seq=128)
    point = SweepPoint("s", "ic3", "ic3", 8, str(fitted / "hardware.yaml"), model, DeviceMesh(1, 2))
    drawn = DrawnPoint(point, Draws(4, 0))
    before, estimate = drawn.key(), point.key()
    assert before == f"{estimate}-d4s0-f{_sha256_16(fitted / 'fit.yaml')}"
    (fitted / "fit.yaml").write_text((fitted / "fit.yaml").read_text() + "# refitted\n")
    assert point.key() == estimate and drawn.key() != before
    bundled = replace(point, hardware="a100-sxm4-80gb")
    assert DrawnPoint(bundled, Draws(4, 0)).key() == f"{bundled.key()}-d4s0"
