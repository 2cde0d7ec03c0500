"""Every file in ``scenarios/`` runs end to end with the real simulator, at a reduced size, and
its report builds; the committed ``reports/<name>/`` match their scenario files.

Reduced size: a copy of the YAML in which every ``parallelism.devices`` list keeps only its
smallest count and every ``model`` list only its first model (at the top level and in each
case), so each topology, mesh choice, chunk count, algorithm and mode of the file is still
simulated once. The full sizes are expanded (checked) without simulating.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.results.io import read_results
from atpsim.scenario.parallelism import JOB_KEYS

ROOT = Path(__file__).parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
IDS = [path.stem for path in SCENARIOS]
REPORTS = ROOT / "reports"


#: A reduced job scenario's most GPUs (a job point is a whole iteration of every replica).
JOB_DEVICES = 64


def reduced(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of the scenario mapping *raw* at its smallest device count and first model.

    A job point is a whole iteration (seconds, where a step point takes milliseconds), so a
    job scenario is cut further: one case per topology, the first topology of a list, the
    first pipeline depth, at most JOB_DEVICES GPUs and a global batch of at most one sample
    per GPU per micro-batch (a multiple of every layout's data-parallel size)."""
    small = copy.deepcopy(raw)
    parts = [small, *small.get("cases", [])]
    job = any(k in (part.get("parallelism") or {}) for part in parts for k in JOB_KEYS)
    for part in parts:
        parallelism = part.get("parallelism") or {}
        devices = parallelism.get("devices")
        if isinstance(devices, list):
            parallelism["devices"] = [min(devices)]
        if isinstance(part.get("model"), list):
            part["model"] = part["model"][:1]
        if job:
            _reduce_job(part)
    if job and small.get("cases"):
        small["cases"] = list({repr(c.get("topology")): c for c in reversed(small["cases"])}.values())[::-1]
    return small


def _reduce_job(part: dict[str, Any]) -> None:
    """Cut a job scenario's part in place (see :func:`reduced`)."""
    if isinstance(part.get("topology"), list):
        part["topology"] = part["topology"][:1]
    parallelism = part.get("parallelism") or {}
    if isinstance(parallelism.get("pp"), list):
        parallelism["pp"] = parallelism["pp"][:1]
    if "devices" in parallelism:
        devices = min(parallelism["devices"] if isinstance(parallelism["devices"], list) else [parallelism["devices"]])
        devices = min(devices, JOB_DEVICES)
        parallelism["devices"] = devices
        tp = parallelism.get("tp")
        if isinstance(tp, dict) and isinstance(tp.get("meshes"), list):  # listed meshes that still fit
            tp["meshes"] = [m for m in tp["meshes"] if not isinstance(m, list) or devices % (m[0] * m[1]) == 0]
        sizes = parallelism.get("micro_batch", 1)
        largest = max(sizes) if isinstance(sizes, list) else sizes
        batches = parallelism.get("global_batch")
        smallest = min(batches) if isinstance(batches, list) else batches
        if smallest is not None and smallest > devices * largest:
            parallelism["global_batch"] = devices * largest


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_there_are_the_papers_scenarios():
    assert {"quickstart", "fig11", "fig12", "table3", "scaling"} <= set(IDS)


@pytest.mark.parametrize("path", SCENARIOS, ids=IDS)
def test_full_size_scenario_expands(path):
    """The full sweep is valid: every topology builds at every device count, every mesh fits."""
    from atpsim.scenario.loader import load_scenario
    from atpsim.scenario.sweep import expand_sweep

    scenario = load_scenario(path, expand=False)
    assert scenario.name == path.stem
    assert expand_sweep(scenario)


@pytest.mark.parametrize("path", SCENARIOS, ids=IDS)
def test_reduced_scenario_runs_and_its_report_builds(path, tmp_path):
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    small = tmp_path / path.name
    small.write_text(yaml.safe_dump(reduced(raw), sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    result = run("run", str(small), "-o", str(out), "--no-progress")
    assert result.exit_code == 0, result.output
    frame = read_results(out)
    assert len(frame) and set(frame["status"]) == {"ok"}
    for name in ("report.md", "report.html", "scenario.yaml"):
        assert (out / name).is_file()
    for entry in (raw.get("report") or {}).get("figures") or ():
        kind = entry if isinstance(entry, str) else next(iter(entry))  # "kind" or {kind: options}
        if kind != "chunk_table":
            assert list((out / "figures").glob(f"{kind}*.png"))
            assert list((out / "figures").glob(f"{kind}*.svg"))


def test_fig12_trend_of_the_paper_on_the_nvlink_network_switch(tmp_path):
    """Figure 12's claim on IC5 (16 to 256 devices): ATP-1's communication grows with N while
    ATP-2's and ATP-4's shrink, simulated and in the closed form. The closed form
    (14·d2 + 4·d1 − 18)/(d1·d2) gives ATP-1 3.75 -> 3.98, ATP-2 2.63 -> 2.04 and ATP-4
    3.38 -> 1.15 in units of Delta."""
    raw = yaml.safe_load((ROOT / "scenarios" / "fig12.yaml").read_text(encoding="utf-8"))
    raw.pop("cases", None)
    raw.update(
        topology="ic5",
        algorithm="rabenseifner",
        parallelism={"devices": [16, 64, 256], "meshes": ["atp-1", "atp-2", "atp-4"]},
    )
    path = tmp_path / "fig12.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    assert run("run", str(path), "-o", str(tmp_path / "o"), "--no-progress").exit_code == 0
    frame = read_results(tmp_path / "o")
    for mode in ("des", "analytic"):
        rows = frame[frame["mode"] == mode]
        table = rows.pivot_table(index="n_devices", columns="atp_i", values="comm_over_delta")
        assert table[1].is_monotonic_increasing, (mode, table)
        assert table[2].is_monotonic_decreasing, (mode, table)
        assert table[4].is_monotonic_decreasing, (mode, table)


@pytest.mark.parametrize("path", SCENARIOS, ids=IDS)
def test_committed_report_is_of_this_scenario_and_rebuilds_unchanged(path, tmp_path):
    """reports/<name>/ holds the run of this very scenario file, and rebuilding its report from
    the committed results table gives the committed report.md byte for byte."""
    committed = REPORTS / path.stem
    if not (committed / "results.csv").is_file():
        pytest.skip(f"no committed report for {path.stem} yet")
    assert (committed / "scenario.yaml").read_bytes() == path.read_bytes()
    copy_dir = tmp_path / path.stem
    shutil.copytree(committed, copy_dir)
    assert run("report", str(copy_dir)).exit_code == 0
    assert (copy_dir / "report.md").read_text() == (committed / "report.md").read_text()
