"""The builder registry (atpsim.topology.registry): builders by name, each with its parameters
declared as data and checked against the builder's signature at registration."""

import inspect

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.builders.base import register_builder
from atpsim.topology.params import BuilderParam
from atpsim.topology.registry import builder_info, builder_names, get_builder


@pytest.mark.parametrize("name", builder_names())
def test_every_builder_declares_exactly_its_signature(name):
    builder = builder_info(name)
    signature = inspect.signature(builder.build).parameters
    named = [k for k, p in signature.items() if p.kind is not p.VAR_KEYWORD]
    assert [k for k in builder.param_names() if k in signature] == named
    for param in builder.params:
        if param.name in signature and signature[param.name].default is not None:
            assert param.default == signature[param.name].default


def test_defaults_come_from_the_signature():
    params = {p.name: p for p in builder_info("ib-cluster").params}
    assert params["generation"].default == "a100" and params["generation"].choices == (
        "a100",
        "h100",
        "b200",
    )
    assert params["nic_bandwidth_Bps"].default is None and params["nic_bandwidth_Bps"].unit == "B/s"
    assert params["nics_per_node"].default is None


def test_a_declaration_that_disagrees_with_the_signature_fails_at_registration():
    def build(gpus=8, latency_s=0.0):
        raise NotImplementedError

    with pytest.raises(TypeError, match=r"undeclared \['latency_s'\], not taken \['lat_s'\]"):
        register_builder(
            "test-bad", [BuilderParam("gpus", "count", "GPUs"), BuilderParam("lat_s", "time", "")]
        )(build)
    assert "test-bad" not in builder_names()


@pytest.mark.parametrize(
    "param, text",
    [
        (BuilderParam("b", "bandwidth", "", default=25e9), "25 GB/s"),
        (BuilderParam("b", "bandwidth", "", default="200 Gb/s"), "200 Gb/s"),
        (BuilderParam("t", "time", "", default=0.3e-6), "0.3 us"),
        (BuilderParam("d", "dims", "", default=(4, 4)), "4x4"),
        (BuilderParam("f", "flag", "", default=False), "false"),
        (BuilderParam("r", "ratio", "", default=1.5), "1.5"),
        (BuilderParam("n", "count", ""), "none"),
    ],
)
def test_default_text_carries_the_unit(param, text):
    assert param.default_text == text


def test_unknown_builder_suggests_the_nearest():
    with pytest.raises(TopologyError, match="did you mean 'torus'"):
        get_builder("toru")
