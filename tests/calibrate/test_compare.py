"""Comparing a folder's layers with their prediction: the error without the run-queue wait."""

import pandas as pd
import pytest
from calibrate_fakes import write_folder

from atpsim.api.calibrate import compare_folder
from atpsim.report.calibration import validation_markdown


def test_run_queue_wait_gives_the_error_without_it(tmp_path):
    """Layers measured 25% slow, of which a fifth (0.2 · 1.25 = 0.25 of the truth) was
    recorded as run-queue wait: the error is -20% (1 / 1.25 - 1), and against measured less
    the wait it is ~0. The verdict stays on the measured time."""
    folder = write_folder(tmp_path / "wait", layer_scale=1.25)
    layers = pd.read_csv(folder / "layers.csv")
    layers["fwd_bwd_run_delay_s_median"] = 0.2 * layers["fwd_bwd_time_s"]
    layers.to_csv(folder / "layers.csv", index=False)
    comparison = compare_folder(folder)
    assert [r.point.run_delay_s for r in comparison.results] == pytest.approx(
        [0.2 * r.point.time_s for r in comparison.results]
    )
    assert comparison.median_abs_error == pytest.approx(0.2, abs=0.02)
    assert comparison.median_abs_error_without_wait == pytest.approx(0.0, abs=0.02)
    assert not comparison.passed
    assert "less its run-queue wait" in validation_markdown(comparison)
