"""The committed reports are what the current code produces (issue 5): a deterministic sample of
each committed results table is simulated again and must match the saved values.

Rendering is checked elsewhere (report.md rebuilds from results.csv); this checks the numbers
themselves, so a change to the engine, the compute model or a preset that moves results fails
here until the reports are regenerated (`atpsim run scenarios/<name>.yaml -j 2`).
"""

from pathlib import Path

import pytest

from atpsim.api import simulate_job_point, simulate_point
from atpsim.results.io import read_rows
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep

REPORTS = Path(__file__).resolve().parents[2] / "reports"
COMPARED = ("step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s", "tflops_per_gpu")
#: A job scenario's rows (atpsim.results.schema.JOB_SCHEMA): the iteration and its breakdown.
JOB_COMPARED = (
    "iteration_time_s",
    "compute_s",
    "exposed_tp_comm_s",
    "exposed_dp_comm_s",
    "pipeline_bubble_s",
    "tflops_per_gpu",
)
SAMPLES_PER_TABLE = 5
#: A job point takes seconds (half a minute at 16,384 GPUs), so job tables check fewer rows,
#: drawn from the layouts of at most JOB_MAX_DEVICES GPUs.
JOB_SAMPLES_PER_TABLE = 3
JOB_MAX_DEVICES = 1024
#: results.csv keeps 10 significant digits (atpsim.results.io.format_value).
REL_TOLERANCE = 1e-8


def _sample(rows, columns, count):
    """Simulated rows spread evenly through the table, first and last included
    (deterministic); a job row that does not fit memory has no times and is skipped."""
    ok = [row for row in rows if row["status"] == "ok" and row[columns[0]] is not None]
    picks = {round(i * (len(ok) - 1) / (count - 1)) for i in range(count)}
    return [ok[i] for i in sorted(picks)]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in REPORTS.iterdir() if (p / "results.csv").is_file())
)
def test_committed_results_match_a_new_simulation(name):
    folder = REPORTS / name
    scenario = load_scenario(folder / "scenario.yaml")
    points = {p.key(): p for p in expand_sweep(scenario)}
    simulate, compared, count = (
        (simulate_job_point, JOB_COMPARED, JOB_SAMPLES_PER_TABLE)
        if scenario.workload == "job"
        else (simulate_point, COMPARED, SAMPLES_PER_TABLE)
    )
    rows = read_rows(folder / "results.csv")
    if scenario.workload == "job":
        rows = [row for row in rows if row["n_devices"] <= JOB_MAX_DEVICES]
    for row in _sample(rows, compared, count):
        fresh = simulate(points[row["point_key"]])
        for column in compared:
            assert fresh[column] == pytest.approx(row[column], rel=REL_TOLERANCE), (
                name,
                row["point_key"],
                column,
            )
