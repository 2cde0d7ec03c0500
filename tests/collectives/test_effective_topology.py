"""A protocol's links (atpsim.collectives.protocols.effective_topology): each link's bandwidth
times the protocol's efficiency for its class; where every efficiency is 1 (Simple under the
spec profile, as a torus runs it) the topology itself, not a copy of its graph."""

import numpy as np

from atpsim.collectives.protocols import (
    SPEC_PROFILE,
    effective_topology,
    load_profile,
    routing_base,
)
from atpsim.topology.spec import load_topology


def test_simple_on_spec_links_is_the_topology_itself():
    torus = load_topology("torus:8x8")
    assert effective_topology(torus, "Simple", SPEC_PROFILE) is torus


def test_a_protocol_below_one_scales_every_link():
    torus = load_topology("torus:8x8")
    ll = effective_topology(torus, "LL", SPEC_PROFILE)
    assert ll is not torus and routing_base(ll) is torus
    assert np.array_equal(ll.links.bandwidth_Bps, torus.links.bandwidth_Bps * 0.5)
    assert effective_topology(torus, "LL", SPEC_PROFILE) is ll  # cached


def test_a_fitted_profile_scales_simple_too():
    """The a100 profile's Simple runs NVLink at a fitted fraction below 1: a scaled copy."""
    node = load_topology("dgx-a100")
    profile = load_profile("a100")
    simple = effective_topology(node, "Simple", profile)
    assert simple is not node
    assert simple.links.bandwidth_Bps.max() < node.links.bandwidth_Bps.max()
