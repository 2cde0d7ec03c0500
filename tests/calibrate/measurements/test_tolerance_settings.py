"""A folder's tolerance.yaml: bad files name the key and suggest the nearest one."""

import pytest

from atpsim.calibrate.measurements.settings import read_settings
from atpsim.errors import AtpsimError


@pytest.mark.parametrize(
    "text, expected",
    [
        (None, "no tolerance.yaml"),
        ("tolerance: 0.2\n", "expected a mapping with key median_abs_error"),
        ("median_abs_error: 0.2\nstatistc: min\n", "statistc: unknown key.*statistic"),
        ("median_abs_error: 0.2\nstatistic: max\n", "statistic: expected one of"),
        ("median_abs_error: -1\n", "expected a fraction > 0"),
    ],
)
def test_tolerance_file_errors(tmp_path, text, expected):
    if text is not None:
        (tmp_path / "tolerance.yaml").write_text(text)
    with pytest.raises(AtpsimError, match=expected):
        read_settings(tmp_path)
