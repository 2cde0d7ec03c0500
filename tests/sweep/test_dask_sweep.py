"""Sweeps on a Dask cluster (``atpsim run --scheduler``, issue 15): the same table as ``-j 1``,
a killed worker's points rerun elsewhere and kept once, interrupt + resume = one clean run,
and a scheduler that does not answer is one line and exit 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from distributed import LocalCluster
from sweep_fakes import calls, failing_simulate, fake_simulate, interrupting_simulate, make_points

import atpsim.sweep.runner as runner
from atpsim.api.workloads import WORKLOADS
from atpsim.cli import main
from atpsim.errors import WorkerDiedError
from atpsim.scenario.point import SweepPoint
from atpsim.scenario.workload import STEP
from atpsim.sweep import SweepInterrupted, run_sweep
from atpsim.sweep.dask_executor import batches, most_per_batch
from atpsim.sweep.progress import SweepProgress

#: The points whose simulation kills its worker process (once, or every time): M2 on 1 x 8.
VICTIM_D2, VICTIM_MODEL = 8, "M2"


def killing_simulate(point: SweepPoint) -> dict[str, Any]:
    """Kills its worker process on the victim point the first time (the file $KILL_MARKER
    records that it did; with $KILL_ALWAYS, every time); otherwise :func:`fake_simulate`."""
    marker = Path(os.environ["KILL_MARKER"])
    victim = point.mesh.d2 == VICTIM_D2 and point.model.name == VICTIM_MODEL
    if victim and (os.environ.get("KILL_ALWAYS") or not marker.exists()):
        marker.touch()
        os._exit(9)
    return fake_simulate(point)


@pytest.fixture(scope="module")
def in_process_cluster() -> Iterator[str]:
    """The address of a cluster of 2 single-threaded workers in this process (fast to start;
    the worker-process cases use ``scheduler='local'``), on tcp:// as a sweep takes it."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://", dashboard_address=":0"
    ) as cluster:
        yield cluster.scheduler_address


def serial_table(tmp_path: Path, points: list[SweepPoint], simulate=fake_simulate) -> bytes:
    run_sweep(points, tmp_path / "serial", jobs=1, simulate=simulate, progress=False)
    return (tmp_path / "serial" / "results.csv").read_bytes()


@pytest.mark.parametrize("simulate", [fake_simulate, failing_simulate])
def test_a_dask_sweep_writes_the_serial_table_byte_for_byte(tmp_path, in_process_cluster, simulate):
    points = make_points(n_devices=64, models=("M1", "M2", "M3", "M4"), chunks=(1, 2, 4))
    out = tmp_path / "dask"
    run_sweep(points, out, scheduler=in_process_cluster, simulate=simulate, progress=False)
    assert (out / "results.csv").read_bytes() == serial_table(tmp_path, points, simulate)


def test_a_killed_worker_s_points_rerun_elsewhere_and_are_kept_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KILL_MARKER", str(tmp_path / "killed"))
    appended: list[str] = []
    append = runner.RowAppender.append
    monkeypatch.setattr(runner.RowAppender, "append", lambda self, row: (
        appended.append(row["point_key"]), append(self, row)))  # fmt: skip
    points = make_points()
    out = tmp_path / "dask"
    run_sweep(points, out, jobs=2, scheduler="local", simulate=killing_simulate, progress=False)
    assert (tmp_path / "killed").exists()
    assert sorted(appended) == sorted(p.key() for p in points)
    assert (out / "results.csv").read_bytes() == serial_table(tmp_path, points)


def test_a_point_that_always_kills_its_worker_stops_the_sweep_with_a_resume_hint(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KILL_MARKER", str(tmp_path / "killed"))
    monkeypatch.setenv("KILL_ALWAYS", "1")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with pytest.raises(WorkerDiedError, match="a worker process died .* rerun with `resume=True`"):
            run_sweep(make_points(), tmp_path, jobs=2, scheduler="local",
                      simulate=killing_simulate, progress=False)  # fmt: skip
    run_sweep(make_points(), tmp_path, resume=True, simulate=fake_simulate, progress=False)
    assert (tmp_path / "results.csv").read_bytes() == serial_table(tmp_path, make_points())


def test_interrupt_then_resume_equals_one_clean_run(tmp_path, monkeypatch, in_process_cluster):
    """Ctrl-C in the driver, here raised by the progress bar on its 5th row: the 5 rows saved
    stay, the rest of the tasks are cancelled, and a resumed run simulates only the others."""
    advance, advanced = SweepProgress.advance, []

    def advance_then_interrupt(bar: SweepProgress, failed: bool = False) -> None:
        advance(bar, failed=failed)
        advanced.append(failed)
        if len(advanced) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(SweepProgress, "advance", advance_then_interrupt)
    points, out = make_points(), tmp_path / "dask"
    with pytest.raises(SweepInterrupted) as info:
        run_sweep(points, out, scheduler=in_process_cluster, simulate=fake_simulate,
                  progress=False)  # fmt: skip
    assert info.value.kept == 5 and "rerun with `resume=True`" in info.value.message()

    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_STOP_AFTER", "1000")
    monkeypatch.setattr(SweepProgress, "advance", advance)
    run_sweep(points, out, scheduler=in_process_cluster, resume=True,
              simulate=interrupting_simulate, progress=False)  # fmt: skip
    assert calls() == len(points) - 5
    assert (out / "results.csv").read_bytes() == serial_table(tmp_path, points)


SCENARIO = """name: tiny
topology: ic3
model: M1
parallelism: {meshes: [atp-1, atp-2]}
chunks: [1, 2]
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_cli(tmp_path: Path, *args: str):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    arguments = ["run", str(scenario), "-o", str(tmp_path / "o"), "--no-progress", *args]
    return CliRunner().invoke(main, arguments, catch_exceptions=False)


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.sweep.dask_executor.CONNECT_TIMEOUT_S", 0.5)
    address = f"tcp://127.0.0.1:{free_port()}"
    result = run_cli(tmp_path, "--scheduler", address)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"atpsim: error: --scheduler: cannot reach a Dask scheduler at '{address}' (OSError: "
    )
    assert "expected 'local' or the address of a running `dask scheduler`" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output


def test_a_malformed_scheduler_address_is_one_line_and_exit_2(tmp_path):
    result = run_cli(tmp_path, "--scheduler", "http://host:8786")
    assert result.exit_code == 2
    assert result.stderr == (
        "atpsim: error: --scheduler: expected 'local' or a scheduler address such as "
        "tcp://host:8786, got 'http://host:8786' (the address a running `dask scheduler` "
        "prints: tcp://HOST:PORT)\n"
    )


@pytest.mark.parametrize("address", ["http://host:8786", "a free port"])
def test_a_scheduler_error_leaves_the_saved_rows_as_they_were(tmp_path, monkeypatch, address):
    """An interrupted run's 2 rows, then --resume on a malformed or silent scheduler."""
    monkeypatch.setattr("atpsim.sweep.dask_executor.CONNECT_TIMEOUT_S", 0.5)
    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake_simulate))
    assert run_cli(tmp_path).exit_code == 0
    out = tmp_path / "o"
    saved = "".join((out / "results.csv").read_text().splitlines(keepends=True)[:3])
    (out / "results.partial.csv").write_text(saved)
    (out / "results.csv").unlink()
    address = address if "://" in address else f"tcp://127.0.0.1:{free_port()}"
    result = run_cli(tmp_path, "--resume", "--scheduler", address)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("atpsim:")]
    assert len(errors) == 1 and errors[0].startswith("atpsim: error: --scheduler: ")
    if address.startswith("tcp://"):  # a malformed one is refused before the rows are read
        assert errors[0].endswith("2 of 4 points kept in " + str(out / "results.partial.csv")
                                  + ": rerun with --resume once fixed")  # fmt: skip
    assert (out / "results.partial.csv").read_text() == saved
    assert not (out / "results.csv").exists()


def test_the_cli_runs_a_sweep_on_a_dask_cluster(tmp_path, monkeypatch, in_process_cluster):
    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake_simulate))
    result = run_cli(tmp_path, "--scheduler", in_process_cluster)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "results.csv").is_file()


def test_batches_share_a_topology_and_leave_every_thread_several_tasks():
    """Points of two sizes interleaved: each size keeps its own open batch, so no batch mixes
    them, and 36 points over 2 threads x 4 tasks make batches of at most 5."""
    small, large = make_points(n_devices=8), make_points(n_devices=16)
    points = [p for pair in zip(small, large, strict=False) for p in pair] + large[len(small):]
    cut = list(batches(enumerate(points), len(points), threads=2))
    assert sorted(i for batch in cut for i, _ in batch) == list(range(len(points)))
    assert all(len({p.n_devices for _, p in batch}) == 1 for batch in cut)
    assert max(len(batch) for batch in cut) == most_per_batch(len(points), 2) == 5
    assert len(cut) >= 2 * 4


def test_a_batch_holds_about_a_second_of_estimated_work():
    """make_points(64) estimates 0.02 + 4e-4 x 64 x chunks: 0.0456 s at chunks 1, 0.0712 s at
    chunks 2, alternating: of its 28 points, 17 hold 0.99 s (the 18th would pass 1 s), then
    the 11 left; 4096 GPUs estimate 1.66 s, so 1 point a batch."""
    points = list(enumerate(make_points(n_devices=64)))
    assert [len(b) for b in batches(points, 1000, threads=1)][:2] == [17, 11]
    assert [len(b) for b in batches(points, 40, threads=1)] == [10, 10, 8]
    lone = list(enumerate(make_points(n_devices=4096, chunks=(1,))))
    assert {len(b) for b in batches(lone, 1000, threads=1)} == {1}


def test_dask_is_imported_only_with_a_scheduler():
    code = (
        "import sys, atpsim.cli, atpsim.commands.run, atpsim.sweep.runner; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("args", "workers"), [((), 2), (("-j", "3"), 3)])
def test_a_local_cluster_has_2_workers_unless_j_says(tmp_path, monkeypatch, args, workers):
    seen: list[int] = []

    def serial_results(todo, n_todo, simulate, scheduler, workers):
        seen.append(workers)
        return (runner.simulate_row(simulate, point, index) for index, point in todo)

    monkeypatch.setattr("atpsim.sweep.dask_executor.dask_results", serial_results)
    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake_simulate))
    assert run_cli(tmp_path, "--scheduler", "local", *args).exit_code == 0
    assert seen == [workers]
