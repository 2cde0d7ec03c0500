"""`atpsim.plan` ranks only the meshes that split the model, and says when it skips some."""

import logging

import pytest

from atpsim.api import plan
from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError

SMALL = ModelConfig("small", hidden=48, heads=4, layers=1, batch=2, seq=64)


def test_meshes_whose_dimensions_do_not_divide_hidden_are_skipped_with_a_warning(caplog):
    """32 GPUs, hidden 48: 32 does not divide 48, so (32, 1) and (1, 32) are skipped."""
    with caplog.at_level(logging.WARNING):
        result = plan("ic5", SMALL, devices=32, chunks=(1,))
    meshes = {(e.mesh.d1, e.mesh.d2) for e in result.entries}
    assert meshes == {(2, 16), (4, 8), (8, 4), (16, 2)}
    assert "skipping 2 of the 6 meshes of 32 GPUs" in caplog.text


def test_no_mesh_left_is_an_error_naming_devices():
    odd = ModelConfig("odd", hidden=7, heads=1, layers=1, batch=1, seq=8)
    with pytest.raises(SimulationError, match="no DeviceMesh of 4 GPUs splits model.hidden") as error:
        plan("ic5", odd, devices=4, chunks=(1,))
    assert error.value.key == "devices"
