"""The b200 NCCL entry (issue 24): derived from h100's by hand, so held here to its rule, and
what it gives a DGX B200 node.

Rule (``atpsim/data/nccl.yaml``, b200 ``source``): every NVLink efficiency (Simple, NVLS,
LL128) and the network efficiency as h100's; the fixed costs h100's x 450/900 (NVLink4 /
NVLink5 spec: the fitted overhead is Simple's pipeline fill at the link rate). When the h100
entry is refitted, this test fails until the b200 entry is derived again.
"""

from importlib import resources

import pytest
import yaml

from atpsim.api import collective
from atpsim.calibrate.provenance import machine_provenance

RATE = 450 / 900


def entries():
    return yaml.safe_load(resources.files("atpsim").joinpath("data/nccl.yaml").read_text())


def test_b200_is_h100_derived_by_its_rule():
    data = entries()
    h100, b200 = data["h100"], data["b200"]
    for key in ("simple_nvlink_efficiency", "nvls_nvlink_efficiency", "ll128_nvlink_efficiency",
                "net_efficiency"):  # fmt: skip
        assert b200[key] == h100[key], key
    for key in ("simple_overhead_s", "ll128_overhead_s"):
        assert b200[key] == pytest.approx(h100[key] * RATE, rel=1e-3), key
    assert b200["provenance"]["status"] == "derived"
    assert "uncertainty" not in b200  # draws hold it: no fit of its own, no rule in nccl_curve


def test_a_dgx_b200_ring_all_reduce_reaches_simple_s_share_of_nvlink5():
    """8 GPUs, 4 GiB ring all-reduce, Simple: busbw -> 0.8295 x 900 GB/s = 746.6 GB/s less the
    fixed costs (under 1% at 4 GiB), so between 735 and 747 GB/s; twice a DGX H100's ring."""
    spec = "nvswitch:8,generation=b200"
    (row,) = collective(spec, "all_reduce", "4G", algorithm="ring", protocol="Simple").rows
    assert 735e9 < row.busbw_Bps < 0.8295 * 900e9
    (h100,) = collective("nvswitch:8,generation=h100", "all_reduce", "4G", algorithm="ring",
                         protocol="Simple").rows  # fmt: skip
    assert row.busbw_Bps == pytest.approx(2 * h100.busbw_Bps, rel=0.01)


def test_a_dgx_b200_names_its_machine_as_derived():
    parts = machine_provenance("ib-cluster:2x8,generation=b200")
    assert (parts.part("hardware").name, parts.part("hardware").status) == ("b200", "derived")
    assert (parts.part("nccl").name, parts.part("nccl").status) == ("b200", "derived")
