"""custom topologies from YAML: a good file, and bad ones with file and key path named."""

import textwrap

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.custom import load_custom
from atpsim.topology.spec import load_topology

GOOD = """
name: two-boxes
nodes:
  - {name: a0, kind: gpu}
  - {name: a1, kind: gpu}
  - {name: sw, kind: switch}
  - {name: b0, kind: gpu}
links:
  - {a: a0, b: sw, kind: custom, bandwidth: "25 GB/s", latency: "1 us"}
  - {a: a1, b: sw, kind: custom, bandwidth: "25 GB/s", latency: "1 us"}
  - {a: sw, b: b0, kind: ib, bandwidth: "200 Gb/s", latency: "0.5 us"}
"""


def write(tmp_path, text, name="topo.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file(tmp_path):
    topo = load_topology(str(write(tmp_path, GOOD)))
    assert topo.name == "two-boxes" and topo.n_gpus == 3
    assert topo.gpu_nodes == ["a0", "a1", "b0"]
    route = topo.route(0, 2)
    assert topo.route_nodes(0, 2) == ["a0", "sw", "b0"]
    assert topo.bottleneck_Bps(route) == 25e9
    assert topo.path_latency_s(route) == pytest.approx(1.5e-6)


def test_explicit_ranks(tmp_path):
    text = GOOD.replace("{name: a0, kind: gpu}", "{name: a0, kind: gpu, rank: 2}")
    text = text.replace("{name: a1, kind: gpu}", "{name: a1, kind: gpu, rank: 0}")
    text = text.replace("{name: b0, kind: gpu}", "{name: b0, kind: gpu, rank: 1}")
    assert load_custom(write(tmp_path, text)).gpu_nodes == ["a1", "b0", "a0"]


def test_mapping_file_form(tmp_path):
    assert load_topology({"file": str(write(tmp_path, GOOD))}).n_gpus == 3


@pytest.mark.parametrize(
    "old, new, key, message",
    [
        ('bandwidth: "200 Gb/s"', 'bandwidth: "-200 Gb/s"', "links[2].bandwidth", "positive"),
        (
            'bandwidth: "200 Gb/s"',
            'bandwidth: "fast"',
            "links[2].bandwidth",
            "expected a positive bandwidth",
        ),
        ('latency: "0.5 us"', 'latency: "-1 us"', "links[2].latency", ">= 0"),
        ("{a: sw, b: b0,", "{a: sw, b: c0,", "links[2].b", "unknown node 'c0'"),
        ("kind: ib,", "kind: ethernet,", "links[2].kind", "link kind"),
        ("{name: sw, kind: switch}", "{name: sw, kind: router}", "nodes[2].kind", "node kind"),
        (
            "{name: sw, kind: switch}",
            "{name: sw, kind: switch, colour: red}",
            "nodes[2].colour",
            "unknown key",
        ),
        ("kind: ib,", "knd: ib,", "links[2].knd", "did you mean 'kind'"),
        ("name: two-boxes", "nmae: two-boxes", "nmae", "did you mean 'name'"),
    ],
)
def test_bad_files_name_the_file_and_key(tmp_path, old, new, key, message):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(TopologyError) as info:
        load_topology(str(path))
    text = str(info.value)
    assert text.startswith(str(path) + ": " + key + ": "), text
    assert message in text


def test_disconnected_graph(tmp_path):
    text = GOOD + "  - {a: c0, b: c1, bandwidth: 1 GB/s}\n"
    text = text.replace("links:", "  - {name: c0, kind: gpu}\n  - {name: c1, kind: gpu}\nlinks:")
    path = write(tmp_path, text)
    with pytest.raises(TopologyError, match=r"topo.yaml: links: the graph is disconnected"):
        load_topology(str(path))


def test_yaml_syntax_error(tmp_path):
    path = write(tmp_path, "nodes: [\n")
    with pytest.raises(TopologyError, match=r"topo.yaml: .*invalid YAML"):
        load_topology(str(path))


def test_missing_file():
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology("no/such/topology.yaml")


def test_inline_builder():
    topo = load_topology(
        {
            "builder": "custom",
            "nodes": [{"name": "x", "kind": "gpu"}, {"name": "y", "kind": "gpu"}],
            "links": [{"a": "x", "b": "y", "kind": "nvlink", "bandwidth": "100 GB/s"}],
        }
    )
    assert topo.route_nodes(0, 1) == ["x", "y"]
