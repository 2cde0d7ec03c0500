"""A scenario without ``name:`` is named by its file's stem and reruns into its own folder as a
named one does (issue 25: the second run was refused, "holds the results of an run"): its
copy in the folder says the name, and a folder whose copy names none is owned by the name
its results were written under."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from atpsim.api.scenario import named_copy
from atpsim.api.workloads import WORKLOADS
from atpsim.cli import main
from atpsim.scenario.workload import STEP

UNNAMED = """# a scenario that names none
topology: ic3
model: M1
parallelism: {meshes: [atp-1, atp-2]}
report:
  notes: |
    a block scalar last, so the added name must start a new key
"""


@pytest.fixture
def simulated(monkeypatch) -> list[str]:
    """The keys of the points simulated, by a fake step simulation (a row from the mesh)."""
    keys: list[str] = []

    def fake(point):
        keys.append(point.key())
        d1, d2 = point.shape.d1, point.shape.d2
        return {"step_time_s": 0.01 * d1 / d2, "tflops_per_gpu": 100.0 * d2 / d1,
                "tflops_per_gpu_paper_unit": 90.0 * d2 / d1, "comm_over_delta": 1.0 + d1}  # fmt: skip

    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake))
    return keys


def run(*args: str):
    return CliRunner().invoke(main, [*args, "--no-progress"], catch_exceptions=False)


@pytest.fixture
def unnamed(tmp_path) -> Path:
    path = tmp_path / "noname.yaml"
    path.write_text(UNNAMED)
    return path


def test_an_unnamed_scenario_reruns_and_resumes_into_its_folder(unnamed, tmp_path, simulated):
    out = tmp_path / "out"
    first = run("run", str(unnamed), "-o", str(out))
    assert first.exit_code == 0, first.output
    assert len(simulated) == 2
    assert set(pd.read_csv(out / "results.csv")["scenario"]) == {"noname"}
    copy = (out / "scenario.yaml").read_text()
    assert copy.startswith(UNNAMED)  # the scenario as written, comments kept, name added
    assert yaml.safe_load(copy) == {**yaml.safe_load(UNNAMED), "name": "noname"}

    again = run("run", str(unnamed), "-o", str(out))
    assert again.exit_code == 0, again.output
    assert len(simulated) == 4  # rerun: every point again

    resumed = run("run", str(unnamed), "-o", str(out), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert len(simulated) == 4  # resumed: every point kept

    from_copy = run("run", str(out / "scenario.yaml"), "-o", str(out), "--resume")
    assert from_copy.exit_code == 0, from_copy.output
    assert len(simulated) == 4  # the copy is the same scenario, same name, same keys


def test_another_scenario_is_still_refused(unnamed, tmp_path, simulated):
    out = tmp_path / "out"
    assert run("run", str(unnamed), "-o", str(out)).exit_code == 0
    other = tmp_path / "other.yaml"
    other.write_text(UNNAMED)
    result = CliRunner().invoke(main, ["run", str(other), "-o", str(out), "--no-progress"])
    assert result.exit_code == 2
    assert "holds the results of run 'noname'; expected an empty folder or one of run 'other'" \
        in result.stderr  # fmt: skip


def test_a_folder_whose_copy_names_none_is_owned_by_its_results_name(unnamed, tmp_path, simulated):
    """A folder written before copies were named: its rows name the run."""
    out = tmp_path / "out"
    assert run("run", str(unnamed), "-o", str(out)).exit_code == 0
    (out / "scenario.yaml").write_text(UNNAMED)
    result = run("run", str(unnamed), "-o", str(out), "--resume")
    assert result.exit_code == 0, result.output
    assert len(simulated) == 2


@pytest.mark.parametrize(
    "text",
    ["{topology: ic3, model: M1}\n", "topology: ic3\nmodel: M1", "topology: ic3\nmodel: M1\n...\n"],
    ids=["flow mapping", "no final newline", "document end marker"],
)
def test_the_named_copy_parses_to_the_scenario_and_its_name(text):
    data = yaml.safe_load(text)
    copy = named_copy(text, data, "my: run")
    assert yaml.safe_load(copy) == {**data, "name": "my: run"}
