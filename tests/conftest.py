"""Suite-wide fixtures."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def restore_the_data_limit() -> Iterator[None]:
    """Commands invoked in-process lower the process's soft data limit to ATPSIM_MAX_MEMORY
    (atpsim.commands._common.cap_memory); put it back after each test, so a test that sets a
    small limit cannot starve the tests after it."""
    before = resource.getrlimit(resource.RLIMIT_DATA)
    yield
    if resource.getrlimit(resource.RLIMIT_DATA) != before:
        resource.setrlimit(resource.RLIMIT_DATA, before)
