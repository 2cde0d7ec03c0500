"""The scenario schema: defaults, one-or-many axes, model and mesh forms, frozen values."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from atpsim.compute.models import ModelConfig
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.schema import (
    MeshChoice,
    Reference,
    ReportOptions,
    Scenario,
    TopologyEntry,
    render_key,
)

GOOD = Path(__file__).parent / "data" / "good"


def _scenario(**fields):
    return Scenario.model_validate({"topology": "ic3", "model": "M2", **fields})


def test_minimal_file_takes_every_default():
    scenario = load_scenario(GOOD / "minimal.yaml")
    assert scenario.name == "minimal"
    assert scenario.source == str(GOOD / "minimal.yaml")
    assert scenario.hardware is None
    assert scenario.parallelism.devices is None
    assert scenario.parallelism.meshes == (MeshChoice("all"),)
    assert scenario.parallelism.placement == ("row-major",)
    assert (scenario.chunks, scenario.algorithm, scenario.mode) == ((1,), ("auto",), ("des",))
    assert scenario.output.formats == ("csv", "parquet")
    assert scenario.calibration == {} and scenario.reference is None


def test_full_file_keeps_every_key():
    scenario = load_scenario(GOOD / "full.yaml")
    assert scenario.name == "full-example"
    assert [t.label() for t in scenario.topology] == ["ic3", "ic5:8", "slow-torus", "torus:4x2"]
    assert [m.config().name for m in scenario.model] == ["M2", "M3+batch=8", "tiny"]
    assert [str(c) for c in scenario.parallelism.meshes] == ["atp-1", "4x2", "2x4", "atp-opt"]
    assert scenario.calibration == {
        "*": {"2x4": {"B1_Bps": 1.2e9, "B2_Bps": 4.95e9}},
        "ic3": {"8x1": {"B1_Bps": 0.97e9}},
    }
    assert scenario.reference == Reference(table3={"M2": {"ic1": {1: 54.5}}})
    assert scenario.report == ReportOptions(figures=["chunk_table"])
    assert scenario.output.formats == ("csv",)


def test_a_single_value_is_a_one_value_axis():
    assert _scenario(chunks=2, mode="analytic") == _scenario(chunks=[2], mode=["analytic"])


def test_scenario_is_frozen():
    scenario = _scenario()
    with pytest.raises(ValidationError):
        scenario.chunks = (2,)


def test_model_preset_with_overrides_and_a_model_from_sizes():
    scenario = _scenario(
        model=[
            {"preset": "M3", "batch": 8, "seq": 1024},
            {"hidden": 16384, "heads": 128, "layers": 2},
        ]
    )
    assert [m.config() for m in scenario.model] == [
        ModelConfig("M3+batch=8,seq=1024", hidden=8192, heads=64, batch=8, seq=1024),
        ModelConfig("h16384-a128", hidden=16384, heads=128, layers=2),
    ]


def test_model_without_preset_needs_hidden_and_heads():
    with pytest.raises(ValidationError, match="missing required key"):
        _scenario(model={"hidden": 1024})


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ([4, 2], MeshChoice("size", 4, 2)),
        ("2x4", MeshChoice("size", 2, 4)),
        ("atp-4", MeshChoice("atp", i=4)),
        ("atp-opt", MeshChoice("opt")),
    ],
)
def test_mesh_forms(text, choice):
    assert _scenario(parallelism={"meshes": [text]}).parallelism.meshes == (choice,)


def test_meshes_all_and_atp_opt_stand_alone():
    assert _scenario(parallelism={"meshes": "all"}).parallelism.meshes == (MeshChoice("all"),)
    assert _scenario(parallelism={"meshes": "atp-opt"}).parallelism.meshes == (MeshChoice("opt"),)
    with pytest.raises(ValidationError, match="'all' stands alone"):
        _scenario(parallelism={"meshes": ["atp-1", "all"]})


def test_topology_forms_become_load_topology_mappings():
    entries = _scenario(
        topology=[
            "ic1",
            "torus:8x8",
            {"preset": "ic5", "gpus": 256},
            {
                "builder": "torus",
                "dims": [4, 4],
                "link_bandwidth": "25 GB/s",
                "link_latency": "1 us",
            },
        ]
    ).topology
    assert [e.spec_mapping() for e in entries] == [
        {"preset": "ic1"},
        {"builder": "torus:8x8"},
        {"preset": "ic5", "gpus": 256},
        {
            "builder": "torus",
            "dims": [4, 4],
            "link_bandwidth_Bps": "25 GB/s",
            "link_latency_s": "1 us",
        },
    ]


@pytest.mark.parametrize("bare", ["25e9", 25, 25.0, float("inf")])
def test_bandwidth_written_as_a_bare_number_is_refused(bare):
    with pytest.raises(ValidationError, match="bare number has no unit"):
        TopologyEntry.model_validate({"preset": "ic6", "link_bandwidth_Bps": bare})


def test_relative_topology_file_resolves_against_the_scenario_folder():
    scenario = load_scenario(GOOD / "custom_topology.yaml")
    path = str((GOOD / "graphs" / "ring4.yaml").resolve())
    assert scenario.topology[0].spec_mapping() == {"file": path}
    assert scenario.topology[0].label() == "ring4"


@pytest.mark.parametrize(
    ("loc", "raw", "key"),
    [
        (("chunks", 0), {"chunks": 2}, "chunks"),
        (("chunks", 1), {"chunks": [1, 2]}, "chunks[1]"),
        (
            ("topology", 0, "links", 3, "bandwidth"),
            {"topology": {"links": []}},
            "topology.links[3].bandwidth",
        ),
        (("model", 0, "preset"), {"model": "M5"}, "model"),
        (("parallelism", "devices", 0), None, "parallelism.devices[0]"),
    ],
)
def test_render_key_follows_the_file(loc, raw, key):
    assert render_key(loc, raw) == key
