"""JointNetwork.disjoint (the proof that a stage's TP traffic meets nothing else, so its pass
is one delay): false exactly where two owners' groups, or an owner and another call, share a
directed link."""

from __future__ import annotations

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.network import JointNetwork
from atpsim.topology.spec import load_topology


def network() -> JointNetwork:
    return JointNetwork(load_topology("ib-cluster:2x8"))


def test_groups_of_one_owner_may_share_links_and_of_two_owners_may_not():
    net = network()
    gather = CallSpec("event", "all_gather", "ring", ((0, 1, 2, 3),), 1e6)
    reduce = CallSpec("event", "reduce_scatter", "ring", ((0, 1, 2, 3),), 1e6)
    assert net.disjoint([(gather, [5]), (reduce, [5])], [])
    assert not net.disjoint([(gather, [5]), (reduce, [6])], [])


def test_owners_on_separate_gpus_are_disjoint_until_another_call_crosses_their_links():
    net = network()
    tp = CallSpec("event", "all_reduce", "ring", ((0, 1, 2, 3), (4, 5, 6, 7)), 1e6)
    owned = [(tp, [0, 1])]
    assert net.disjoint(owned, [])
    across = CallSpec("event", "all_reduce", "ring", ((8, 9),), 1e6)  # the other node only
    assert net.disjoint(owned, [across])
    over_nics = CallSpec("event", "broadcast", "binomial", ((3, 11),), 1e6)  # NIC, not NVLink
    assert net.disjoint(owned, [over_nics])
    send = CallSpec("event", "broadcast", "binomial", ((3, 4),), 1e6)  # GPU 3's NVLink port
    assert not net.disjoint(owned, [send])
    assert net.disjoint([(tp, [0, 1]), (across, [1])], [])  # owner 1 also on the other node: apart
    pair = CallSpec("event", "all_reduce", "ring", ((0, 1),), 1e6)  # owner 0's GPUs 0 and 1
    assert net.disjoint([(tp, [0, 1]), (pair, [0])], [])
    assert not net.disjoint([(tp, [0, 1]), (pair, [1])], [])
