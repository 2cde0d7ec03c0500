"""An H100 cluster computes as an H100 wherever it is run, and says so (issue 23, item 1): the
generation of an ``ib-cluster`` spec names the hardware profile (``meta["hardware"]``), and
`plan` (a step and ``--global-batch``), `search`, scenarios, `collective` and the API all read
it through :func:`atpsim.compute.hardware.topology_hardware`; the output names the profile."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import atpsim.api as api
from atpsim.api.search import search_points, search_space
from atpsim.api.step import step_point
from atpsim.cli import main
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.training.job import load_machine

H100 = "ib-cluster:1x8,generation=h100"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_plan_on_an_h100_cluster_runs_h100_sxm_and_names_it_in_the_title():
    """The machine line, then the step table's title, name the profile; its steps are those of
    --hardware h100-sxm, not of the A100 profile the cluster ran before."""
    output = invoke("plan", "-t", H100, "-m", "M1", "--chunks", "1")
    assert output.splitlines()[0].startswith("# machine: hardware h100-sxm (fitted), NCCL h100 (")
    assert output.splitlines()[1].strip() == f"M1 on {H100}, 8 GPUs, h100-sxm"
    ranked = api.plan(H100, "M1", chunks=(1,))
    given = api.plan(H100, "M1", chunks=(1,), hardware="h100-sxm")
    as_a100 = api.plan(H100, "M1", chunks=(1,), hardware="a100-sxm4-80gb")
    assert ranked.hardware == "h100-sxm"
    assert [e.des.step_time_s for e in ranked.entries] == \
        [e.des.step_time_s for e in given.entries]  # fmt: skip
    assert ranked.entries[0].des.step_time_s < as_a100.entries[0].des.step_time_s
    assert invoke("plan", "-t", "ib-cluster:1x8", "-m", "M1", "--chunks", "1").splitlines()[1].strip() \
        == "M1 on ib-cluster:1x8, 8 GPUs, a100-sxm4-80gb"  # fmt: skip


def test_plan_global_batch_on_an_h100_cluster_runs_and_names_h100_sxm():
    output = invoke("plan", "-t", H100, "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1",
                    "--micro-batch", "2", "--max-tp", "2", "--no-progress")  # fmt: skip
    assert output.splitlines()[0].startswith("# machine: hardware h100-sxm (fitted), NCCL h100 (")
    assert output.splitlines()[1].startswith("# defaults: --hardware h100-sxm (the topology's),")
    planned = api.plan_job(H100, "gpt3-125m", devices=8, global_batch=16, pipelines=(1,),
                           micro_batches=(2,), max_tp=2)  # fmt: skip
    assert planned.hardware == "h100-sxm"


def test_collective_names_the_hardware_it_ran():
    output = invoke("collective", "-t", H100, "--bytes", "1M")
    assert "plus hardware h100-sxm's collective_overhead_s" in output
    assert "\n# machine: hardware h100-sxm (fitted), NCCL h100 (" in output
    assert api.collective(H100, sizes="1M").hardware == "h100-sxm"
    assert api.collective("dgx-a100", sizes="1M").hardware == "a100-sxm4-80gb"


def test_the_api_a_scenario_and_a_search_default_to_the_generation_s_profile():
    assert step_point(H100, "M1", (8, 1), 1).hardware == "h100-sxm"
    assert step_point(H100, "M1", (8, 1), 1, hardware="a100-sxm4-80gb").hardware == "a100-sxm4-80gb"
    assert load_machine(H100, 8, None)[1].name == "h100-sxm"
    points = expand_sweep(Scenario.model_validate(
        {"topology": [H100, "ib-cluster:1x8"], "model": "M1", "parallelism": {"meshes": [[8, 1]]}}))
    assert [p.hardware for p in points] == ["h100-sxm", "a100-sxm4-80gb"]
    space = search_space(topology=[H100], model=["gpt3-125m"],
                         parallelism={"global_batch": [16], "pp": [1], "micro_batch": [2]})
    assert {p.hardware for p in search_points(space, max_tp=2)} == {"h100-sxm"}


def test_search_names_each_machine_before_its_defaults(tmp_path):
    """One line per machine of the space, each naming its topology when there are several."""
    result = CliRunner().invoke(main, [
        "search", "-t", H100, "-t", "dgx-a100", "-m", "gpt3-125m", "--global-batch", "16",
        "--pp", "1", "--micro-batch", "2", "--max-tp", "2", "--network", "isolated",
        "-o", str(tmp_path), "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = lines.index(next(line for line in lines if line.startswith("# machine")))
    assert lines[first].startswith(f"# machine ({H100}): hardware h100-sxm (fitted), NCCL h100 (")
    assert "NIC 400 Gb/s NDR (spec, the DGX H100's)" in lines[first]
    assert lines[first + 1].startswith("# machine (dgx-a100): hardware a100-sxm4-80gb (fitted)")
    assert lines[first + 2].startswith("# defaults: ")


@pytest.mark.parametrize("spec", ["ib-cluster:2x8,generation=h100", "ib-cluster:2x8"])
def test_topo_route_shows_the_generation_s_pcie_hop(spec):
    rate = "63.0 GB/s" if "h100" in spec else "31.5 GB/s"
    lines = [line for line in invoke("topo", "route", spec, "0", "8").splitlines() if " pcie " in line]
    assert len(lines) == 2 and all(rate in line for line in lines)
