"""Issue 11, section 4: a results folder is written by one run at a time, an interrupted run's
rows are never deleted without being asked, and worker processes die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sweep_fakes import fake_simulate, make_points

from atpsim.errors import AtpsimError, OutputLockedError
from atpsim.results.io import PARTIAL_CSV
from atpsim.sweep.lock import LOCK_FILE, folder_lock
from atpsim.sweep.runner import DISCARDED_CSV, run_sweep

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from atpsim.sweep.lock import folder_lock
            with folder_lock({str(tmp_path)!r}):
                print("locked", flush=True)
                time.sleep(30)
        """)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputLockedError, match=f"pid {holder.pid}") as info:
            with folder_lock(tmp_path):
                pass
        assert info.value.exit_code == 2 and str(tmp_path) in info.value.format()
    finally:
        holder.kill()
        holder.wait()
    with folder_lock(tmp_path):  # a killed holder leaves no stale lock
        pass
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_lock_is_released_after_an_error(tmp_path):
    with pytest.raises(ZeroDivisionError), folder_lock(tmp_path):
        raise ZeroDivisionError
    with folder_lock(tmp_path):
        pass


def _interrupted_run(folder: Path) -> bytes:
    """A partial table as an interrupted run leaves it: the first points' rows."""
    run_sweep(make_points()[:3], folder, simulate=fake_simulate, progress=False)
    (folder / "results.csv").rename(folder / PARTIAL_CSV)
    return (folder / PARTIAL_CSV).read_bytes()


def test_a_rerun_without_resume_refuses_to_drop_partial_rows(tmp_path):
    saved = _interrupted_run(tmp_path)
    with pytest.raises(AtpsimError, match="`resume=True` .* `fresh=True`"):
        run_sweep(make_points(), tmp_path, simulate=fake_simulate, progress=False)
    assert (tmp_path / PARTIAL_CSV).read_bytes() == saved


def test_fresh_sets_the_partial_rows_aside(tmp_path):
    saved = _interrupted_run(tmp_path)
    run_sweep(make_points(), tmp_path, fresh=True, simulate=fake_simulate, progress=False)
    assert (tmp_path / DISCARDED_CSV).read_bytes() == saved
    assert not (tmp_path / PARTIAL_CSV).exists()


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_workers_exit_when_their_parent_is_killed(tmp_path):
    """A parent with two busy workers is SIGKILLed; its workers must be gone within seconds."""
    script = textwrap.dedent("""
        import os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from atpsim.sweep import runner
        pool = ProcessPoolExecutor(2, initializer=runner._init_worker, initargs=(os.getpid(),))
        futures = [pool.submit(time.sleep, 60) for _ in range(2)]
        time.sleep(1.0)
        print(" ".join(str(p) for p in pool._processes), flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)  # fmt: skip
    assert parent.stdout is not None
    workers = [int(p) for p in parent.stdout.readline().split()]
    assert len(workers) == 2
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.1)
    alive = [p for p in workers if _alive(p)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert alive == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
