"""NVLink SHARP (NVLS) is a property of the NVSwitch generation: Hopper and Blackwell switches
reduce in the network, the A100's third-generation NVSwitch does not."""

import pytest

from atpsim.collectives.nvls import has_nvls
from atpsim.topology.spec import load_topology


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("dgx-a100", False),
        ("dgx-h100", True),
        ("nvswitch:8,generation=b200", True),
        ("nvl72:domains=1,gpus_per_domain=8", True),
    ],
)
def test_nvls_is_where_the_switch_generation_has_it(spec, expected):
    assert has_nvls(load_topology(spec)) is expected
