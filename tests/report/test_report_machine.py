"""A report names the machine of each (topology, hardware) of its results under its header
(atpsim.report.machine), rebuilt from the scenario copy, and still builds where it cannot be."""

from __future__ import annotations

import pandas as pd
from report_fakes import fig11_frame

from atpsim.report.build import build_report
from atpsim.report.machine import NOT_REBUILT, machine_lines, topology_specs
from atpsim.results.io import read_results, write_results

SCENARIO = """name: m
topology: [ic1, {preset: ic4, label: cluster}]
model: M1
cases:
  - {topology: "ib-cluster:2x8,generation=h100"}
"""
IC1 = ("Machine ic1: hardware a100-sxm4-80gb (fitted), NCCL spec (derived: line formats only), "
       "links of ic1 (fitted: host staging, socket, cross socket gpu).")  # fmt: skip


def frame(*pairs: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(pairs, columns=["topology", "hardware"])


def test_each_distinct_topology_and_hardware_gets_one_line_in_table_order(tmp_path):
    lines = machine_lines(
        frame(("ic1", "a100-sxm4-80gb"), ("cluster", "h100-sxm"), ("ic1", "a100-sxm4-80gb"),
              ("ib-cluster:2x8,generation=h100", "h100-sxm")),
        SCENARIO, tmp_path)  # fmt: skip
    assert lines[0] == IC1
    assert lines[1].startswith("Machine cluster: hardware h100-sxm (fitted), NCCL spec (")
    assert "NIC 27.18 Gb/s (fitted, the ic4 preset's; spec 200 Gb/s)" in lines[1]
    assert lines[2] == (
        "Machine ib-cluster:2x8,generation=h100: hardware h100-sxm (fitted), NCCL h100 (fitted: "
        "Simple, NVLS; derived: LL128, fixed costs, network), NIC 400 Gb/s NDR (spec, the DGX "
        "H100's), GPU-NIC PCIe Gen5 x16 63 GB/s (spec)."
    )
    assert len(lines) == 3


def test_a_topology_that_cannot_be_rebuilt_is_said_so(tmp_path):
    """Not in the scenario copy, a custom file gone, a hardware file gone, or no scenario:
    the line says so; the others are unaffected."""
    text = SCENARIO.replace("[ic1,", "[{file: gone.yaml}, ic1,")
    assert topology_specs(text, tmp_path).keys() == {"ic1", "cluster", "ib-cluster:2x8,generation=h100"}
    not_shown = f"Machine gone with a100-sxm4-80gb: {NOT_REBUILT}."
    assert machine_lines(frame(("gone", "a100-sxm4-80gb"), ("ic1", "a100-sxm4-80gb")), text, tmp_path) \
        == [not_shown, IC1]  # fmt: skip
    assert machine_lines(frame(("ic1", "missing.yaml")), text, tmp_path) == \
        [f"Machine ic1 with missing.yaml: {NOT_REBUILT}."]  # fmt: skip
    assert machine_lines(frame(("ic1", "a100-sxm4-80gb")), ": : not yaml", tmp_path) == \
        [f"Machine ic1 with a100-sxm4-80gb: {NOT_REBUILT}."]  # fmt: skip
    assert machine_lines(pd.DataFrame({"x": [1]}), SCENARIO, tmp_path) == []


def test_the_page_carries_the_lines_under_its_header(tmp_path):
    text = "name: m\ntopology: [ic1, ic4]\nmodel: M1\n"
    write_results(tmp_path, fig11_frame(), parquet=False)
    (tmp_path / "scenario.yaml").write_text(text)
    build_report(tmp_path, read_results(tmp_path), text)
    md = (tmp_path / "report.md").read_text().split("## Key findings")[0]
    assert md.index("Built by atpsim") < md.index(IC1) < md.index("Machine ic4: ") < md.index("Units, one")
