"""An NVLS call on the joint network: its flows weighted by the NCCL profile's NVLS efficiency
(not Simple's), so the plain flow run of the call alone equals its own time."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.collectives.protocols import load_profile
from atpsim.engine.joint.calls import CLASSES, PROTOCOL_ROWS, CallSpec, weight_table
from atpsim.engine.joint.graph import GraphBuilder
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.plain import run_plain
from atpsim.topology.spec import load_topology


def test_an_nvls_call_is_weighted_by_the_nvls_efficiency():
    network = JointNetwork(load_topology("dgx-h100"))
    spec = CallSpec("nccl", "all_reduce", "auto", (tuple(range(8)),), 2**30)
    plan = network.plan(spec)
    assert plan.protocol == "NVLS"
    h100 = load_profile("h100")
    assert h100.efficiency["NVLS"]["nvlink"] != h100.efficiency["Simple"]["nvlink"]
    table = weight_table(network.nominal)
    row, column = PROTOCOL_ROWS.index("NVLS"), CLASSES.index("nvlink")
    assert table[row, column] == pytest.approx(1 / h100.efficiency["NVLS"]["nvlink"])
    b = GraphBuilder()
    task = b.comm(b.call(spec), [0], [])
    assert np.isclose(run_plain(b.build(), network).finish_s[task], plan.alone_s.max(), rtol=1e-9)


def test_a_ring_call_keeps_simples_row():
    network = JointNetwork(load_topology("dgx-h100"))
    spec = CallSpec("nccl", "reduce_scatter", "ring", (tuple(range(8)),), 2**30)
    assert network.plan(spec).protocol == "Simple"
