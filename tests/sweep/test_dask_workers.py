"""A Dask worker without atpsim, or with another version (issue 15): one line naming the
worker, exit 2, and the rows already on disk untouched, whether it is there when the sweep
starts or joins later (its tasks would otherwise wait forever: Dask logs the unpicklable task
and never fails it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from sweep_fakes import fake_simulate

from atpsim import __version__
from atpsim.api.workloads import WORKLOADS
from atpsim.cli import main
from atpsim.errors import AtpsimError
from atpsim.scenario.workload import STEP
from atpsim.sweep.dask_workers import WorkerCheck

SCENARIO = """name: tiny
topology: ic3
model: M1
parallelism: {meshes: [atp-1, atp-2]}
chunks: [1, 2]
"""
#: A `dask worker` in a process where `import atpsim` fails, as on a machine without it.
WORKER_WITHOUT_ATPSIM = (
    "import sys; sys.modules['atpsim'] = None; "
    "from distributed.cli.dask_worker import main; "
    "sys.argv = ['dask-worker', {address!r}, '--nthreads', '1', '--no-nanny', "
    "'--no-dashboard']; main()"
)


@pytest.fixture()
def cluster_of_a_worker_without_atpsim() -> Iterator[tuple[str, str]]:
    """(scheduler address, worker address): a scheduler in this process and one worker
    process that cannot import atpsim."""
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:  # fmt: skip
        address = cluster.scheduler_address
        code = WORKER_WITHOUT_ATPSIM.format(address=address)
        worker = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
        try:
            with Client(address, set_as_default=False) as client:
                client.wait_for_workers(1, timeout=30)
                yield address, next(iter(client.nthreads()))
        finally:
            worker.terminate()
            worker.wait(timeout=30)


def test_a_worker_without_atpsim_is_one_line_exit_2_and_the_saved_rows_stay(
    tmp_path, monkeypatch, cluster_of_a_worker_without_atpsim
):
    address, worker = cluster_of_a_worker_without_atpsim
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "o"
    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake_simulate))
    run = ["run", str(scenario), "-o", str(out), "--no-progress"]
    assert CliRunner().invoke(main, run).exit_code == 0
    lines = (out / "results.csv").read_text().splitlines(keepends=True)
    saved = "".join(lines[:3]).encode()  # 2 of 4 rows, as an interrupted run leaves them
    (out / "results.partial.csv").write_bytes(saved)
    (out / "results.csv").unlink()

    result = CliRunner().invoke(main, [*run, "--resume", "--scheduler", address])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if not line.startswith("INFO")]
    assert errors == [
        f"atpsim: error: --scheduler: the Dask worker at {worker} cannot import atpsim "
        "(ModuleNotFoundError: import of atpsim halted; None in sys.modules); install atpsim "
        f"{__version__} on every worker; 2 of 4 points kept in {out / 'results.partial.csv'}: "
        "rerun with --resume once fixed"
    ]
    assert (out / "results.partial.csv").read_bytes() == saved


class FakeClient:
    """What WorkerCheck asks of a client: the workers' threads, and each one's probe answer."""

    def __init__(self, answers: dict[str, object]):
        self.answers, self.joined = answers, ["tcp://a:1"]

    def nthreads(self) -> dict[str, int]:
        return {worker: 1 for worker in self.joined}

    def run(self, function, probe, *, workers, on_error):
        assert on_error == "return"
        return {worker: self.answers[worker] for worker in workers}


def test_a_worker_that_joins_later_is_checked_once_it_is_due(monkeypatch):
    client = FakeClient({"tcp://a:1": "0.1.0", "tcp://b:1": ModuleNotFoundError("atpsim")})
    check = WorkerCheck(client)  # type: ignore[arg-type]
    assert check.checked == {"tcp://a:1"} and check.threads == 1
    client.joined.append("tcp://b:1")
    check.check_when_due()  # not due yet: b is not asked
    assert check.checked == {"tcp://a:1"}
    monkeypatch.setattr(check, "next_check_s", 0.0)
    with pytest.raises(AtpsimError, match="worker at tcp://b:1 cannot import atpsim"):
        check.check_when_due()


def test_a_worker_with_another_version_is_named():
    client = FakeClient({"tcp://a:1": "0.0.9"})
    with pytest.raises(AtpsimError) as info:
        WorkerCheck(client)  # type: ignore[arg-type]
    assert info.value.format() == (
        f"scheduler: the Dask worker at tcp://a:1 runs atpsim 0.0.9, this driver {__version__}; "
        "install the same version on every worker"
    )
