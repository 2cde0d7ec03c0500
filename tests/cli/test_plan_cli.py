"""`atpsim plan` as a user reads it (issue 11, section 5): the table's columns carry their
units, its numbers are the API's in those units, and the fastest mesh comes first."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import atpsim.api as api
from atpsim.cli import main

ARGS = ["plan", "-t", "torus:2x2", "-m", "M1", "--chunks", "1,2"]


@pytest.fixture(scope="module")
def stdout() -> str:
    result = CliRunner().invoke(main, ARGS)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def printed(stdout: str) -> list[list[str]]:
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
        if len(cells) >= 10:
            rows.append(cells)
    return rows


def test_the_first_line_names_the_machine(stdout):
    """A torus is a theory fabric: the A100 profile (the default), collectives on bare links,
    no NIC (atpsim.calibrate.provenance)."""
    assert stdout.splitlines()[0] == (
        "# machine: hardware a100-sxm4-80gb (fitted), NCCL none (bare links)"
    )


def test_columns_name_their_units(printed):
    header = printed[0]
    assert header[:8] == ["mesh", "ATP-i", "chunks", "step ms", "compute ms", "comm ms",
                          "exposed ms", "TFLOP/s/GPU"]  # fmt: skip


def test_rows_are_the_api_plan_in_milliseconds_fastest_first(printed):
    ranked = api.plan("torus:2x2", "M1", chunks=(1, 2))
    body = printed[1:]
    assert len(body) == len(ranked.entries) == 3 * 2
    steps = [float(row[3]) for row in body]
    assert steps == sorted(steps)
    for row, entry in zip(body, ranked.entries, strict=True):
        assert row[0] == f"{entry.mesh.d1}x{entry.mesh.d2}" and int(row[2]) == entry.chunks
        assert float(row[3]) == pytest.approx(entry.des.step_time_s * 1e3, abs=0.006)
        assert float(row[5]) == pytest.approx(entry.des.comm_time_s * 1e3, abs=0.006)
        assert float(row[6]) == pytest.approx(entry.des.exposed_comm_s * 1e3, abs=0.006)
        assert 0.001 < float(row[3]) < 10_000  # milliseconds, not seconds or microseconds
    assert "DES best" in body[0][-1]
    assert all("DES best" not in row[-1] for row in body[1:])
