"""Fixtures of the calibration tests (the synthetic folder: see calibrate_fakes)."""

import pytest
from calibrate_fakes import write_folder


@pytest.fixture
def synthetic_folder(tmp_path):
    return write_folder(tmp_path / "synthetic")
