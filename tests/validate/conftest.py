"""Fixtures of the validation tests (the synthetic folder: see validate_fakes)."""

import pytest
from validate_fakes import write_folder


@pytest.fixture
def synthetic_folder(tmp_path):
    return write_folder(tmp_path / "synthetic")
