"""The machine a run ran as (atpsim.calibrate.provenance): each part named with its status, the
data files' provenance entries, and the fit commands keeping them."""

from importlib import resources

import pytest
import yaml

from atpsim.api import MachineProvenance, machine_provenance
from atpsim.calibrate.fit import nccl_curve
from atpsim.calibrate.provenance import MachinePart, checked_nccl_provenance
from atpsim.collectives.protocols import profile_names as nccl_profile_names
from atpsim.collectives.protocols import profile_provenance
from atpsim.compute.hardware import (
    PROVENANCE_STATUSES,
    load_profile,
    profile_from_dict,
    profile_names,
    profile_to_dict,
)
from atpsim.errors import AtpsimError
from atpsim.topology.builders.switch import GENERATION_HARDWARE
from atpsim.topology.spec import load_topology

H100_CLUSTER = "ib-cluster:2x8,generation=h100"


def kinds(machine: MachineProvenance) -> list[str]:
    return [part.kind for part in machine.parts]


def test_h100_cluster_names_every_part_with_its_status():
    """An H100 cluster spec runs as h100-sxm (GEMM fitted), NCCL h100 (Simple and NVLS
    fitted to the 8xH100 rows, the rest derived from a100), the DGX H100's NDR NIC (400 Gb/s
    = 50 GB/s, spec) behind PCIe Gen5 x16 (32 GT/s x 16 lanes x 128/130 / 8 = 63 GB/s, spec)."""
    machine = machine_provenance(H100_CLUSTER)
    assert kinds(machine) == ["hardware", "nccl", "nic", "pcie"]
    assert machine.part("hardware") == MachinePart("hardware", "h100-sxm", "fitted")
    nccl = machine.part("nccl")
    assert (nccl.name, nccl.status) == ("h100", "fitted")
    assert dict(nccl.breakdown) == {"fitted": ("Simple", "NVLS"),
                                    "derived": ("LL128", "fixed costs", "network")}  # fmt: skip
    assert machine.part("nic") == MachinePart("nic", "400 Gb/s NDR", "spec", "the DGX H100's")
    assert machine.part("pcie") == MachinePart("pcie", "Gen5 x16 63 GB/s", "spec")
    assert machine.line() == (
        "# machine: hardware h100-sxm (fitted), NCCL h100 (fitted: Simple, NVLS; derived: LL128, "
        "fixed costs, network), NIC 400 Gb/s NDR (spec, the DGX H100's), GPU-NIC PCIe Gen5 x16 "
        "63 GB/s (spec)"
    )


def test_a_nic_rate_given_is_given_even_at_the_default_rate():
    """nic_bandwidth_Bps=50 GB/s is the DGX H100's rate, but the caller chose it: 'given'."""
    default = machine_provenance(H100_CLUSTER).part("nic")
    given = machine_provenance(f"{H100_CLUSTER},nic_bandwidth_Bps=50 GB/s").part("nic")
    other = machine_provenance(f"{H100_CLUSTER},nic_bandwidth_Bps=30 GB/s").part("nic")
    assert (default.status, given.status, other.status) == ("spec", "given", "given")
    assert (given.name, other.name) == ("400 Gb/s NDR", "240 Gb/s")
    assert load_topology(f"{H100_CLUSTER},nic_bandwidth_Bps=50 GB/s").meta["nic_given"] is True
    assert load_topology(H100_CLUSTER).meta["nic_given"] is False


def test_a100_cluster_defaults_to_the_dgx_a100s_hdr_nic_and_gen4():
    machine = machine_provenance("ib-cluster:2x8")
    assert machine.part("nic") == MachinePart("nic", "200 Gb/s HDR", "spec", "the DGX A100's")
    assert machine.part("pcie") == MachinePart("pcie", "Gen4 x16 31.5 GB/s", "spec")


def test_dgx_a100_runs_the_fitted_a100_nccl_profile_and_has_no_nic():
    """dgx-a100 models no NICs: hardware and NCCL only."""
    machine = machine_provenance("dgx-a100")
    assert kinds(machine) == ["hardware", "nccl"]
    assert machine.part("hardware").name == "a100-sxm4-80gb"
    assert (machine.part("nccl").name, machine.part("nccl").status) == ("a100", "fitted")
    assert machine.part("nic") is None and machine.part("pcie") is None


def test_the_hardware_asked_for_is_the_one_named():
    machine = machine_provenance("dgx-a100", "a100-sxm4-80gb-paper-stack")
    assert machine.part("hardware") == MachinePart("hardware", "a100-sxm4-80gb-paper-stack", "fitted")


def test_a_theory_fabric_runs_no_nccl():
    """ic5 and tori: collectives on bare links, no NIC, no PCIe."""
    for spec in ("ic5", "torus:4x4"):
        machine = machine_provenance(spec)
        assert kinds(machine) == ["hardware", "nccl"]
        assert machine.part("nccl").text() == "NCCL none (bare links)"


def test_an_nccl_machine_without_a_fitted_entry_runs_the_line_formats():
    """ic1's PCIe tree names no NCCL entry: the spec profile, derived from the line formats."""
    nccl = machine_provenance("ic1").part("nccl")
    assert nccl.text() == "NCCL spec (derived: line formats only)"


def test_calibrated_presets_name_their_fitted_links():
    """The paper's ic1 and ic4 carry link rates fitted to its Table 3 (presets.yaml keeps the
    spec they replaced); an override of one of them is no longer the preset's fit."""
    assert machine_provenance("ic1").part("links").text() == (
        "links of ic1 (fitted: host staging, socket, cross socket gpu)"
    )
    nic = machine_provenance("ic4").part("nic")
    assert (nic.name, nic.status, nic.note) == ("27.18 Gb/s", "fitted", "the ic4 preset's; spec 200 Gb/s")
    assert machine_provenance({"preset": "ic4", "nic_bandwidth_Bps": "10 GB/s"}).part("nic").status == "given"
    assert machine_provenance("ic3").part("links") is None


def test_every_hardware_profile_states_its_status():
    for name in profile_names():
        assert load_profile(name).provenance_status in PROVENANCE_STATUSES, name
    for name in set(GENERATION_HARDWARE.values()) - {"b200"}:
        assert load_profile(name).provenance_status == "fitted"
    assert load_profile("b200").provenance_status == "derived"  # no Blackwell GEMM measured


def test_every_nccl_entry_states_its_status_and_parts():
    for name in nccl_profile_names():
        found = profile_provenance(name)
        status, breakdown = checked_nccl_provenance(name, found)
        assert status in PROVENANCE_STATUSES and found["summary"], name
        assert {s for s, _ in breakdown} <= set(PROVENANCE_STATUSES), name


def test_a_bad_status_is_refused_with_its_key():
    data = profile_to_dict(load_profile("h100-sxm"))
    data["provenance"] = {"status": "guessed"}
    with pytest.raises(AtpsimError, match=r"provenance\.status: expected one of"):
        profile_from_dict(data)
    data["provenance"] = {"status": "spec", "sumary": "x"}
    with pytest.raises(AtpsimError, match=r"provenance\.sumary: unknown key"):
        profile_from_dict(data)
    with pytest.raises(AtpsimError, match=r"h100\.provenance\.parts\.assumed"):
        checked_nccl_provenance("h100", {"status": "fitted", "parts": {"assumed": ["LL"]}})


def test_a_profile_file_without_provenance_is_unstated(tmp_path):
    data = profile_to_dict(load_profile("h100-sxm"))
    del data["provenance"]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    assert machine_provenance("dgx-h100", str(path)).part("hardware").status == "unstated"


def test_the_nccl_fit_commands_keep_the_provenance():
    """nccl_curve rewrites the a100 entry (values and uncertainty block) and the h100 entry's
    derived lines; nccl_h100 the h100 entry's fitted lines (both through nccl_curve.rewrite):
    the provenance entries come through unchanged."""
    text = resources.files("atpsim").joinpath("data/nccl.yaml").read_text()
    before = yaml.safe_load(text)
    a100 = {k: before["a100"][k] for k in ("simple_nvlink_efficiency", "ll128_nvlink_efficiency",
                                           "simple_overhead_s", "ll128_overhead_s")}  # fmt: skip
    text = nccl_curve.rewrite(text, "a100", a100, "fitted", before["a100"]["uncertainty"])
    text = nccl_curve.rewrite(text, "h100", nccl_curve.derive_h100(a100), "derived",
                              {"derived_from": "a100", "why": "w"})  # fmt: skip
    text = nccl_curve.rewrite(text, "h100", {"simple_nvlink_efficiency": 0.83}, "fitted")
    after = yaml.safe_load(text)
    for name in ("a100", "h100"):
        assert after[name]["provenance"] == before[name]["provenance"]
