"""The sweep runner: rows in point order, failures isolated, interrupt + resume = clean run."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sweep_fakes import (
    calls,
    crashing_simulate,
    failing_simulate,
    fake_simulate,
    interrupting_simulate,
    make_points,
)

from atpsim.errors import SimulationError
from atpsim.results.io import read_rows
from atpsim.results.schema import COLUMN_NAMES, normalize_row
from atpsim.sweep import SweepInterrupted, run_sweep, simulate_row

HERE = Path(__file__).parent


def clean_run(tmp_path: Path, points, name="clean") -> bytes:
    run_sweep(points, tmp_path / name, simulate=fake_simulate, progress=False)
    return (tmp_path / name / "results.csv").read_bytes()


def test_rows_follow_point_order_and_match_the_schema(tmp_path):
    points = make_points()
    frame = run_sweep(points, tmp_path, simulate=fake_simulate, progress=False)
    assert list(frame.columns) == list(COLUMN_NAMES)
    assert frame["point_key"].tolist() == [p.key() for p in points]
    assert frame["point_index"].tolist() == list(range(len(points)))
    assert set(frame["status"]) == {"ok"}
    for row in read_rows(tmp_path / "results.csv"):
        assert normalize_row(row) == row
    assert not (tmp_path / "results.partial.csv").exists()


def test_point_columns_describe_the_point(tmp_path):
    point = make_points()[3]
    row = simulate_row(fake_simulate, point, 3)
    assert (row["topology"], row["model"], row["hidden"], row["mesh"]) == ("ic3", "M1", 2048, "4x2")
    assert (row["d1"], row["d2"], row["atp_i"], row["chunks"]) == (4, 2, 2, 2)


def test_same_points_give_a_byte_identical_table(tmp_path):
    points = make_points()
    assert clean_run(tmp_path, points, "a") == clean_run(tmp_path, points, "b")


def test_parallel_run_equals_serial_run(tmp_path):
    points = make_points()
    run_sweep(points, tmp_path / "par", jobs=2, simulate=fake_simulate, progress=False)
    assert (tmp_path / "par" / "results.csv").read_bytes() == clean_run(tmp_path, points)


def test_a_failing_point_is_a_row_and_a_log_line(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="atpsim.sweep")
    frame = run_sweep(make_points(), tmp_path, simulate=failing_simulate, progress=False)
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 4 and set(failed["d2"]) == {2}
    assert set(failed["error"]) == {"ZeroDivisionError: fake failure on d2 == 2"}
    assert failed["step_time_s"].isna().all() and failed["mesh"].notna().all()
    assert "failed (topology=ic3 n_devices=8 model=M1 mesh=4x2 chunks=1" in caplog.text


def test_failures_are_isolated_in_worker_processes_too(tmp_path):
    frame = run_sweep(make_points(), tmp_path, jobs=2, simulate=failing_simulate, progress=False)
    assert (frame["status"] == "failed").sum() == 4


@pytest.mark.parametrize("jobs", [1, 2])
def test_interrupt_then_resume_equals_one_clean_run(tmp_path, monkeypatch, jobs):
    points = make_points()
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_STOP_AFTER", "5")
    out = tmp_path / "run"
    with pytest.raises(SweepInterrupted) as info:
        run_sweep(points, out, jobs=jobs, simulate=interrupting_simulate, progress=False)
    kept = read_rows(out / "results.partial.csv")
    assert info.value.kept == len(kept) >= (5 if jobs == 1 else 0)
    assert "rerun with `resume=True`" in str(info.value)
    assert not (out / "results.csv").exists()

    monkeypatch.setenv("FAKE_STOP_AFTER", "1000")
    (tmp_path / "counter").unlink()
    run_sweep(points, out, jobs=jobs, resume=True, simulate=interrupting_simulate, progress=False)
    assert calls() == len(points) - len(kept)
    assert (out / "results.csv").read_bytes() == clean_run(tmp_path, points)


def test_resume_retries_failed_points_and_skips_finished_ones(tmp_path, monkeypatch):
    points = make_points()
    run_sweep(points, tmp_path, simulate=failing_simulate, progress=False)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_STOP_AFTER", "1000")
    run_sweep(points, tmp_path, resume=True, simulate=interrupting_simulate, progress=False)
    assert calls() == 4
    assert (tmp_path / "results.csv").read_bytes() == clean_run(tmp_path, points)


def test_resume_ignores_rows_of_other_points(tmp_path, caplog):
    run_sweep(make_points(models=("M1",)), tmp_path, simulate=fake_simulate, progress=False)
    points = make_points(models=("M2",))
    run_sweep(points, tmp_path, resume=True, simulate=fake_simulate, progress=False)
    assert "ignoring 8 saved rows" in caplog.text
    assert (tmp_path / "results.csv").read_bytes() == clean_run(tmp_path, points)


def test_a_dead_worker_stops_the_sweep_with_a_resume_hint(tmp_path):
    with pytest.raises(SimulationError, match="a worker process died .* rerun with `resume=True`"):
        run_sweep(make_points(), tmp_path, jobs=2, simulate=crashing_simulate, progress=False)
    run_sweep(make_points(), tmp_path, resume=True, simulate=fake_simulate, progress=False)
    assert (tmp_path / "results.csv").read_bytes() == clean_run(tmp_path, make_points())


def test_duplicate_points_are_simulated_once(tmp_path, monkeypatch):
    points = make_points(models=("M1",), chunks=(1,))
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_STOP_AFTER", "1000")
    frame = run_sweep(
        points + points, tmp_path / "o", simulate=interrupting_simulate, progress=False
    )
    assert calls() == len(points)
    assert frame["point_index"].tolist() == list(range(2 * len(points)))


def test_progress_bar_counts_every_point_and_the_failures(tmp_path):
    import io

    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    points = make_points()
    frame = run_sweep(points, tmp_path, simulate=failing_simulate, console=console)
    failed = sum(p.mesh.d2 == 2 for p in points)
    assert len(frame) == len(points) and (frame["status"] == "failed").sum() == failed
    assert f"{len(points)}/{len(points)}" in screen.getvalue()


SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from sweep_fakes import make_points, slow_simulate
from atpsim.sweep import SweepInterrupted, run_sweep
try:
    run_sweep(make_points(), {out!r}, jobs=2, simulate=slow_simulate, progress=False,
              resume={resume})
except SweepInterrupted as stop:
    print(stop.message(), flush=True)
    sys.exit(130)
print("done", flush=True)
"""


def _script(tmp_path: Path, resume: bool) -> list[str]:
    code = textwrap.dedent(SCRIPT).format(here=str(HERE), out=str(tmp_path / "o"), resume=resume)
    return [sys.executable, "-c", code]


def test_sigint_keeps_finished_points_and_resume_completes(tmp_path):
    env = {**os.environ, "FAKE_SLEEP_S": "0.3"}
    proc = subprocess.Popen(_script(tmp_path, False), env=env, stdout=subprocess.PIPE, text=True)
    partial = tmp_path / "o" / "results.partial.csv"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not partial.exists() or len(read_rows(partial)) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    kept = len(read_rows(partial))
    assert f"interrupted: {kept} of 16 points kept" in out and 3 <= kept < 16

    env["FAKE_SLEEP_S"] = "0"
    done = subprocess.run(_script(tmp_path, True), env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr
    assert (tmp_path / "o" / "results.csv").read_bytes() == clean_run(tmp_path, make_points())
