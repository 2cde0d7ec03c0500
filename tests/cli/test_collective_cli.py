"""`atpsim collective`: nccl-tests-like rows, CSV, groups, and one-line errors (exit 2)."""

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.topology.presets import preset_info
from atpsim.topology.spec import load_topology
from atpsim.units import parse_bandwidth


def run(*args):
    """The collective command writes nothing, so no scratch folder is needed."""
    return CliRunner().invoke(main, ["collective", *args])


def rows(result):
    return list(csv.DictReader(io.StringIO(result.output)))


def test_dgx_a100_ring_busbw_is_the_nvlink_bandwidth():
    """8 A100 on NVSwitch, bare links (``--protocol none``): busbw = 2(p-1)/p * n / T with
    T = 2(p-1)/p n/B + 14 alpha, i.e. B = 300 GB/s per direction less the latency share (well
    under 1% at 1 GiB)."""
    result = run("--topology", "dgx-a100", "--algorithm", "ring", "--protocol", "none",
                 "--bytes", "1G")
    assert result.exit_code == 0, result.output
    assert "all_reduce by ring on dgx-a100" in result.output and "p = 8" in result.output
    busbw = float(result.output.strip().splitlines()[-1].split()[5])
    nvlink = float(load_topology("dgx-a100").links.bandwidth_Bps.min()) / 1e9
    assert 0.99 * nvlink < busbw <= nvlink


def test_ic1_is_bound_by_host_memory_staging():
    """ic1 stages every copy through the sending socket's host memory. The in-socket 4-GPU
    rings of DeviceMesh(2, 4) (dim 2: GPUs 0-3 and 4-7): the 4 ring hops that leave socket 0's
    GPUs share its one host link, so busbw = host bandwidth / 4 (13.8 / 4 = 3.46 GB/s fitted).
    The 8-GPU ring: its hops 3 -> 4 and 7 -> 0 also cross to the other socket, one flow each
    way through the socket bridge (2.30 GB/s) and the receiving GPU's cross-socket lane (0.787
    GB/s), after host staging shared by 4 hops (3.46); a ring moves at its slowest hop, so
    busbw = min(host / 4, bridge, lane) = lane (paper Section 5.3's B1 of DeviceMesh(8, 1))."""
    topo = load_topology("ic1")
    kinds = np.array(topo.links.kind)
    host = float(np.min(topo.links.bandwidth_Bps[kinds == "host"])) / 1e9
    in_socket = run("--topology", "ic1", "--groups", "dim2:2x4", "--bytes", "1G", "--csv")
    assert in_socket.exit_code == 0, in_socket.output
    assert rows(in_socket)[0]["p"] == "4"
    assert float(rows(in_socket)[0]["busbw_GBps"]) == pytest.approx(host / 4, rel=1e-2)
    params = preset_info("ic1")["params"]
    lane = parse_bandwidth(params["cross_socket_gpu_bandwidth_Bps"]) / 1e9
    bridge = parse_bandwidth(params["socket_bandwidth_Bps"]) / 1e9
    assert lane < bridge < host / 4
    ring = run("--topology", "ic1", "--bytes", "1G", "--csv")
    assert ring.exit_code == 0, ring.output
    assert float(rows(ring)[0]["busbw_GBps"]) == pytest.approx(lane, rel=1e-2)


def test_csv_has_a_row_per_size_doubling():
    result = run("-t", "nvswitch:8", "--bytes", "8:1K", "--csv", "-d", "half")
    assert result.exit_code == 0, result.output
    table = rows(result)
    assert [int(r["size_bytes"]) for r in table] == [8 * 2**i for i in range(8)]
    assert [int(r["count"]) for r in table] == [4 * 2**i for i in range(8)]
    times = [float(r["time_us"]) for r in table]
    assert times == sorted(times)


def test_mesh_groups_and_first_gpus():
    result = run("-t", "torus:4x4", "--groups", "dim1:4x4", "--bytes", "1M", "--csv")
    assert result.exit_code == 0, result.output
    assert rows(result)[0]["p"] == "4"
    first = run("-t", "nvswitch:8", "--devices", "4", "--bytes", "1M")
    assert "all (4 GPUs), p = 4" in first.output


def test_all_to_all_defaults_to_pairwise():
    result = run("-t", "nvswitch:8", "--op", "all_to_all", "--bytes", "1M")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1].split()[6] == "pairwise"


def test_dgx_a100_reproduces_the_azure_curve():
    """`atpsim collective --topology dgx-a100 --bytes 1M:8G` against measured-data.md's Azure
    ND A100 v4 busbw: within 10% at every size from 64 MiB, 25% at 1-8 MiB."""
    measured = {2**20: 36.22, 2**23: 89.99, 2**26: 166.63, 2**27: 174.18, 2**28: 213.87,
                2**29: 221.58, 2**30: 228.10, 2**33: 231.58}
    result = run("--topology", "dgx-a100", "--bytes", "1M:8G", "--csv")
    assert result.exit_code == 0, result.output
    table = {int(r["size_bytes"]): r for r in rows(result)}
    for size, busbw in measured.items():
        tolerance = 0.10 if size >= 2**26 else 0.25
        assert float(table[size]["busbw_GBps"]) == pytest.approx(busbw, rel=tolerance)
        assert table[size]["algorithm"] == "ring" and table[size]["channels"] == "1"
    assert {table[s]["protocol"] for s in measured} == {"LL", "LL128", "Simple"}


def test_json_rows_carry_the_nccl_columns():
    result = run("-t", "dgx-h100", "--bytes", "1G", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["rows"]
    assert row["algorithm"] == "nvls" and row["protocol"] == "Simple"
    assert row["overhead_s"] == 0.0 and row["busbw_Bps"] > 450e9


def test_the_header_csv_and_json_name_the_machine():
    """The header's second line is the machine (atpsim.calibrate.provenance); the CSV names the
    hardware per row; the JSON carries every part with its status."""
    text = run("-t", "dgx-a100", "--bytes", "1G").output.splitlines()
    assert text[1] == ("# machine: hardware a100-sxm4-80gb (fitted), NCCL a100 (fitted: Simple, "
                       "LL128, fixed costs; measured: network)")  # fmt: skip
    (row,) = rows(run("-t", "dgx-h100", "--bytes", "1G", "--csv"))
    assert (row["topology"], row["hardware"]) == ("dgx-h100", "h100-sxm")
    machine = json.loads(run("-t", "dgx-h100", "--bytes", "1G", "--json").output)["machine"]
    assert [(p["kind"], p["name"], p["status"]) for p in machine["parts"]] == \
        [("hardware", "h100-sxm", "fitted"), ("nccl", "h100", "fitted")]  # fmt: skip


@pytest.mark.parametrize(
    "args,message",
    [
        (["-t", "dgx-a100", "-a", "rign"], "did you mean 'ring'"),
        (["-t", "dgx-a100", "--groups", "dim3:2x4"], "--groups"),
        (["-t", "dgx-a100", "--groups", "dim1:4x4"], "needs 16 GPUs"),
        (["-t", "dgx-a100", "--devices", "9"], "--devices"),
        (["-t", "dgx-a100", "--bytes", "lots"], "--bytes: expected a size"),
        (["-t", "dgx-a100", "--bytes", "-5"], "--bytes: expected a size"),
        (["-t", "dgx-a100", "--bytes", "1M:-3"], "--bytes: expected a size"),
        (["-t", "dgx-a100", "--protocol", "foo"], "'foo'; expected one of LL, LL128, Simple"),
        (["-t", "dgx-a101"], "did you mean"),
        (["-t", "dgx-a100", "-d", "floot"], "did you mean 'float'"),
        (["-t", "dgx-a100", "--protocol", "LL129"], "unknown protocol 'LL129'"),
        (["-t", "dgx-a100", "--channels", "0"], "channel count >= 1"),
        (["-t", "dgx-a100", "-a", "nvls"], "NVLS needs an NVSwitch"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.count("expected") <= 1, "one statement of what was expected"
    assert "Traceback" not in result.output
