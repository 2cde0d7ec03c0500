"""The whole loop on the committed CPU measurements (issue 6): refit from the raw CSVs, predict
the layers, compare. The one-core-per-rank set passes its stored tolerance; the set with four
ranks on two cores fails it (oversubscribed ranks wait to be rescheduled, which atpsim does not
model: see its README) and is kept as a failing data set, so this test says so rather than hide it.
The one-H100 and one-H200 sets fail their 10% too: the validation layer runs kernels atpsim's program does not
charge (its README).
"""

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.cli import main

MEASUREMENTS = Path(__file__).resolve().parents[2] / "validation" / "measurements"
EXPECTED_EXIT = {
    "cpu-gloo-2core-2ranks": 0, "cpu-gloo-2core": 1, "h100-sxm-1gpu": 1, "h200-1gpu": 1
}


@pytest.mark.parametrize("name", sorted(EXPECTED_EXIT))
def test_validate_refits_and_gives_the_committed_verdict(name, tmp_path):
    folder = tmp_path / name
    shutil.copytree(MEASUREMENTS / name, folder)
    shutil.rmtree(folder / "fitted")
    result = CliRunner().invoke(main, ["validate", str(folder)])
    assert result.exit_code == EXPECTED_EXIT[name], result.output
    assert "median |error|" in result.output and "%" in result.output
    for fitted in sorted((MEASUREMENTS / name / "fitted").iterdir()):
        assert (folder / "fitted" / fitted.name).read_bytes() == fitted.read_bytes(), fitted.name
