"""`atpsim hcm` through click's runner: Figure 7's matrices as printed, JSON, errors."""

import json

from click.testing import CliRunner

from atpsim.cli import main

#: Figure 7(a) with the paper's numbers: 4 nodes x 4 GPUs, each GPU pair 4 NVLinks x 50 GB/s
#: (one 200 GB/s link), one 200 Gb/s HDR NIC per node on one switch.
FIGURE_7A = """
name: figure-7a
nodes:
{nodes}
links:
{links}
"""


def figure_7a_yaml():
    nodes = ["  - {name: ib, kind: switch}"]
    links = []
    for node in range(4):
        nodes.append(f"  - {{name: nic{node}, kind: nic}}")
        links.append(f"  - {{a: nic{node}, b: ib, kind: ib, bandwidth: 200 Gb/s}}")
        ranks = range(4 * node, 4 * node + 4)
        nodes.extend(f"  - {{name: g{r}, kind: gpu}}" for r in ranks)
        links.extend(
            f"  - {{a: g{r}, b: nic{node}, kind: pcie, bandwidth: 31.5 GB/s}}" for r in ranks
        )
        links.extend(
            f"  - {{a: g{a}, b: g{b}, kind: nvlink, bandwidth: 200 GB/s}}"
            for a in ranks
            for b in ranks
            if a < b
        )
    return FIGURE_7A.format(nodes="\n".join(nodes), links="\n".join(links))


def run(*args):
    return CliRunner().invoke(main, ["hcm", *args])


def rows(output, layer):
    """The P2P rows and the group bandwidth row printed for *layer*, as lists of strings."""
    block = output.split(f"Layer {layer}:")[1].split("Layer ")[0]
    p2p = [line.split()[1:] for line in block.splitlines() if "-" in line.split()[1:]]
    group = block.split("group bandwidth:")[1].strip().splitlines()[0].split()
    return p2p, group


def test_figure_7a_from_a_yaml_file(tmp_path):
    path = tmp_path / "fig7a.yaml"
    path.write_text(figure_7a_yaml())
    result = CliRunner().invoke(main, ["hcm", str(path)])
    assert result.exit_code == 0, result.output
    assert "0: 0-3  1: 4-7  2: 8-11  3: 12-15" in result.output
    assert "P2P: 25 for all 12 pairs" in result.output
    assert "group bandwidth: 25 for all 4 ranks" in result.output
    assert "P2P: 200 for all 12 pairs" in result.output
    assert "group bandwidth: 600 for all 4 ranks" in result.output
    assert "4 of 4 groups, same matrix" in result.output


def test_figure_7b_torus():
    result = run("torus:4x4")
    assert result.exit_code == 0, result.output
    p2p, group = rows(result.output, 1)
    assert p2p[0] == ["-", "100", "0", "100"] and group == ["200"] * 4
    p2p, group = rows(result.output, 2)
    assert p2p[1] == ["25", "-", "25", "0"] and group == ["50"] * 4
    assert "GB/s per direction" in result.output


def test_devices_sizes_a_scalable_preset():
    result = run("ic5", "--devices", "16")
    assert result.exit_code == 0, result.output
    assert "(16 GPUs)" in result.output and "P2P: 450 for all 240 pairs" in result.output


def test_json_has_bytes_per_second():
    result = run("ic2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["bandwidth_unit"] == "bytes/s per direction"
    pairs, gpus = data["layers"]
    assert pairs["groups"][0]["ranks"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert gpus["groups"][0]["p2p_Bps"] == [[0.0, 300e9], [300e9, 0.0]]


def test_unknown_topology_is_one_line_and_exit_2():
    result = run("ic9")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "atpsim: error:" in result.output
    assert "did you mean" in result.output
