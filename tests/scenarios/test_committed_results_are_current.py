"""The committed reports are what the current code produces (issue 5): a deterministic sample of
each committed results table is simulated again and must match the saved values.

Rendering is checked elsewhere (report.md rebuilds from results.csv); this checks the numbers
themselves, so a change to the engine, the compute model or a preset that moves results fails
here until the reports are regenerated (`atpsim run scenarios/<name>.yaml -j 2`).
"""

from pathlib import Path

import pytest

from atpsim.api import simulate_point
from atpsim.results.io import read_rows
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep

REPORTS = Path(__file__).resolve().parents[2] / "reports"
COMPARED = ("step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s", "tflops_per_gpu")
SAMPLES_PER_TABLE = 5
#: results.csv keeps 10 significant digits (atpsim.results.io.format_value).
REL_TOLERANCE = 1e-8


def _sample(rows):
    """Rows spread evenly through the table, first and last included (deterministic)."""
    ok = [row for row in rows if row["status"] == "ok"]
    picks = {round(i * (len(ok) - 1) / (SAMPLES_PER_TABLE - 1)) for i in range(SAMPLES_PER_TABLE)}
    return [ok[i] for i in sorted(picks)]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in REPORTS.iterdir() if (p / "results.csv").is_file())
)
def test_committed_results_match_a_new_simulation(name):
    folder = REPORTS / name
    points = {p.key(): p for p in expand_sweep(load_scenario(folder / "scenario.yaml"))}
    for row in _sample(read_rows(folder / "results.csv")):
        fresh = simulate_point(points[row["point_key"]])
        for column in COMPARED:
            assert fresh[column] == pytest.approx(row[column], rel=REL_TOLERANCE), (
                name,
                row["point_key"],
                column,
            )
