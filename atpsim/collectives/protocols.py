"""NCCL's protocols LL, LL128 and Simple: per-step latency and bandwidth efficiency as data.

A collective run with protocol P costs (NCCL's own model, src/graph/tuning.cc, extended):

    T = base[P] + sum over its steps of step_latency[P][class of the step's hop]
        + overhead[P]                         (fitted where measured; 0 otherwise)
        + the link-level time of its schedule on links running at bandwidth x efficiency[P]

*base* and *step_latency* are NCCL's constants (measured-data.md "NCCL's own latency model"
[C]): classes 'nvlink', 'pcie' and 'net'. The link-level time is the engine's, on the
topology with every link's bandwidth scaled by the protocol's efficiency for its class
(:func:`effective_topology`): LL sends 8-byte lines of 4 data bytes and 4 flag bytes (1/2),
LL128 128-byte lines of 120 data bytes (120/128), Simple the data itself (1) -- NCCL's
``src/device/prims_ll.h`` / ``prims_ll128.h``; these are derived, not fitted. What a machine
loses beyond them (NVLink achieved by NCCL's kernels, the pipeline fill of Simple's chunks) is a
*profile* (``atpsim/data/nccl.yaml``): named effective parameters, each fitted by
``python -m atpsim.calibrate.fit.nccl_curve`` to a measured curve, or derived from one and the
spec, with the source beside it. A topology names its profile in ``meta["nccl"]``; without
one it gets :data:`SPEC_PROFILE` (line formats only).

NVLS (NVLink SHARP all-reduce, :mod:`atpsim.collectives.nvls`) runs NCCL's Simple protocol
(Simple's latency and overhead) but reaches its own fraction of the links: the switch's
multimem loads and stores are not Simple's ring kernel. Its links are scaled by the profile's
``NVLS`` row (:func:`link_row`), equal to Simple's where no NVLS efficiency is given.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from atpsim.errors import SimulationError, did_you_mean
from atpsim.topology.graph import Topology

PROTOCOLS = ("LL", "LL128", "Simple")
#: Protocol names accepted on the command line: the three, ``auto`` (NCCL's tuner: the
#: fastest by this model) and ``none`` (bare links: no protocol latency or efficiency).
PROTOCOL_CHOICES = (*PROTOCOLS, "auto", "none")

#: NCCL base latency per protocol, ring and tree (s) [C].
BASE_LATENCY_S = {"ring": {"LL": 6.6e-6, "LL128": 14e-6, "Simple": 8.4e-6},
                  "tree": {"LL": 6.8e-6, "LL128": 14e-6, "Simple": 8.4e-6}}
#: NCCL per-step latency by hop class and protocol (s) [C].
STEP_LATENCY_S = {"nvlink": {"LL": 0.6e-6, "LL128": 1.9e-6, "Simple": 3.4e-6},
                  "pcie": {"LL": 1.0e-6, "LL128": 2.5e-6, "Simple": 5.7e-6},
                  "net": {"LL": 2.7e-6, "LL128": 4.0e-6, "Simple": 14e-6}}
#: Data bytes per wire byte of each protocol's line format (derived, module docstring).
LINE_EFFICIENCY = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}
#: The efficiency row of an NVLS call run with Simple (:func:`link_row`).
NVLS_ROW = "NVLS"
#: Rows of a profile's efficiency: the protocols, then NVLS.
LINK_ROWS = (*PROTOCOLS, NVLS_ROW)
#: Link kind -> latency / efficiency class.
LINK_CLASS = {"nvlink": "nvlink", "nvlink_network": "nvlink", "torus": "nvlink",
              "custom": "nvlink", "pcie": "pcie", "host": "pcie", "socket": "pcie", "ib": "net"}


@dataclass(frozen=True)
class Profile:
    """A machine's effective NCCL parameters: *efficiency[P][class]* (fraction of a link's
    bandwidth protocol P achieves; P one of :data:`LINK_ROWS`, ``NVLS`` for an NVLS call with
    Simple) and *overhead_s[P]* (fixed cost per call, s, per protocol)."""

    name: str
    efficiency: dict[str, dict[str, float]] = field(hash=False)
    overhead_s: dict[str, float] = field(hash=False)


def _line_only() -> dict[str, dict[str, float]]:
    eff = {p: {c: LINE_EFFICIENCY[p] for c in ("nvlink", "pcie", "net")} for p in PROTOCOLS}
    return {**eff, NVLS_ROW: dict(eff["Simple"])}


#: No fit: every class at the line-format efficiency, no overhead.
SPEC_PROFILE = Profile("spec", _line_only(), {p: 0.0 for p in PROTOCOLS})


def profile_from_dict(name: str, data: dict[str, Any]) -> Profile:
    """A :class:`Profile` from a ``nccl.yaml`` entry: ``simple_nvlink_efficiency``,
    ``ll128_nvlink_efficiency`` (fractions), ``net_efficiency`` (Simple over the network),
    ``simple_overhead_s``, ``ll128_overhead_s``, and optionally ``nvls_nvlink_efficiency``
    (an NVLS call's NVLink fraction; default Simple's: a machine without NVLS never uses it).
    LL's NVLink efficiency is LL128's scaled by the line formats (1/2 over 120/128); PCIe
    stays at the line formats."""
    eff = _line_only()
    nvl_s, nvl_128 = float(data["simple_nvlink_efficiency"]), float(data["ll128_nvlink_efficiency"])
    net = float(data.get("net_efficiency", 1.0))
    eff["Simple"].update(nvlink=nvl_s, net=net)
    eff["LL128"].update(nvlink=nvl_128, net=net * LINE_EFFICIENCY["LL128"])
    eff["LL"].update(nvlink=nvl_128 * LINE_EFFICIENCY["LL"] / LINE_EFFICIENCY["LL128"],
                     net=net * LINE_EFFICIENCY["LL"])
    eff[NVLS_ROW] = dict(eff["Simple"], nvlink=float(data.get("nvls_nvlink_efficiency", nvl_s)))
    overhead = {"LL": 0.0, "LL128": float(data["ll128_overhead_s"]),
                "Simple": float(data["simple_overhead_s"])}
    return Profile(name, eff, overhead)


@cache
def _profiles_data() -> dict[str, Any]:
    text = resources.files("atpsim").joinpath("data/nccl.yaml").read_text()
    return dict(yaml.safe_load(text))


def load_profile(name: str | None) -> Profile:
    """The profile called *name* in ``atpsim/data/nccl.yaml``; :data:`SPEC_PROFILE` for None."""
    if name is None or name == "spec":
        return SPEC_PROFILE
    data = _profiles_data()
    if name not in data:
        raise SimulationError(f"unknown NCCL profile {name!r}{did_you_mean(name, data)}")
    return profile_from_dict(name, data[name])


def profile_names() -> list[str]:
    """The entries of ``atpsim/data/nccl.yaml``, in the file's order."""
    return [str(name) for name in _profiles_data()]


def profile_provenance(name: str) -> dict[str, Any]:
    """The ``provenance`` mapping of entry *name* of ``atpsim/data/nccl.yaml`` (``status``,
    ``parts``, ``summary``; :mod:`atpsim.calibrate.provenance` checks and shows it); empty
    where the entry says none or there is no such entry. The parameters' parsing
    (:func:`profile_from_dict`) does not read it."""
    entry = _profiles_data().get(name)
    found = entry.get("provenance") if isinstance(entry, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def topology_profile(topology: Topology) -> Profile:
    """The profile *topology* names in ``meta["nccl"]`` (or holds there: a parameter draw,
    :func:`with_profile`), else :data:`SPEC_PROFILE`."""
    named = topology.meta.get("nccl")
    return named if isinstance(named, Profile) else load_profile(named)


#: Builders of GPU machines that run NCCL (PCIe trees, NVLink pairs, NVSwitch nodes and
#: InfiniBand clusters of them). The paper's theory fabrics (the NVLink-Network switch, tori)
#: and custom graphs are not: their collectives run on bare links, as the paper analyses them.
NCCL_BUILDERS = frozenset({"pcie-tree", "nvlink-pairs", "nvswitch", "ib-cluster"})


def runs_nccl(topology: Topology) -> bool:
    """Whether *topology* is a machine whose collectives NCCL runs (:data:`NCCL_BUILDERS`, or
    any topology naming an NCCL profile in ``meta["nccl"]``)."""
    return topology.meta.get("builder") in NCCL_BUILDERS or "nccl" in topology.meta


def check_protocol(protocol: str, key: str | None = None) -> str:
    """*protocol* if valid; a SimulationError (at *key*, else about the *protocol* parameter)
    naming the choices otherwise."""
    if protocol not in PROTOCOL_CHOICES:
        hint = did_you_mean(protocol, PROTOCOL_CHOICES)
        raise SimulationError(f"unknown protocol {protocol!r}{hint}"
                              if hint.startswith(" (") else f"unknown protocol {protocol!r}"
                              f"; expected one of {', '.join(PROTOCOL_CHOICES)}", key=key, param="protocol")
    return protocol


#: The share of a profile's fitted overhead each op pays (derived, not fitted). The overhead
#: is fitted on all-reduce (``nccl.yaml``), and what it stands for is the fill of Simple's chunk
#: pipeline along the call's sequential steps. An all-reduce runs two phases, a reduce-scatter
#: then an all-gather (NCCL's ring: ``2(p-1)`` steps in one kernel; NVLS: the switch's reduce,
#: then its multicast); reduce-scatter, all-gather, broadcast and reduce run one phase (``p-1``
#: steps, or one NVLS pass), so they pay half. No measured small-size figure for those ops is in
#: the shared data to fit their own; ops not listed pay all of it.
OVERHEAD_SHARE = {"all_reduce": 1.0, "reduce_scatter": 0.5, "all_gather": 0.5,
                  "broadcast": 0.5, "reduce": 0.5}


def latency_s(protocol: str, kind: str, step_classes: list[str], profile: Profile,
              op: str = "all_reduce") -> float:
    """*protocol*'s fixed time for one call of *op*: base (*kind* 'ring' or 'tree') + the
    per-step latency of each step's hop class in *step_classes* + *op*'s share
    (:data:`OVERHEAD_SHARE`) of the profile's overhead (s)."""
    steps = sum(STEP_LATENCY_S[c][protocol] for c in step_classes)
    share = OVERHEAD_SHARE.get(op, 1.0)
    return BASE_LATENCY_S[kind][protocol] + steps + share * profile.overhead_s[protocol]


def link_row(algorithm: str, protocol: str) -> str:
    """The efficiency row (:data:`LINK_ROWS`) that scales the links of a call of NCCL
    *algorithm* with *protocol*: ``NVLS`` for NVLS with Simple, else the protocol itself."""
    return NVLS_ROW if algorithm == "nvls" and protocol == "Simple" else protocol


_EFFECTIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Effective topology -> the topology it scales (same graph, links and router).
_SCALED_FROM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def routing_base(topology: Topology) -> Topology:
    """The topology whose routes *topology* shares: the one an :func:`effective_topology`
    scales (same links in the same order, same router; only bandwidths differ), else itself."""
    return _SCALED_FROM.get(topology, topology)


def with_profile(topology: Topology, profile: Profile) -> Topology:
    """*topology* running NCCL with *profile* instead of its own (same graph, links and router,
    so routes are shared): how a parameter draw of the NCCL profile reaches the engine
    (:mod:`atpsim.calibrate.uncertainty`). *profile*'s name must differ from every other
    profile's with other values: :func:`effective_topology` caches by name."""
    copy = Topology(topology.name, topology.graph, topology.router, topology.description,
                    {**topology.meta, "nccl": profile})
    _SCALED_FROM[copy] = routing_base(topology)
    return copy


def effective_topology(topology: Topology, protocol: str, profile: Profile) -> Topology:
    """*topology* with each link's bandwidth x *profile*'s efficiency of *protocol* (a row of
    :data:`LINK_ROWS`: :func:`link_row`) for the link's class (cached per topology, so the engine's memo holds across calls);
    *topology* itself where every link's efficiency is 1 (Simple under the spec profile: no
    copy of the graph, 120 MB on a 65,536-GPU torus, and the bare-link answers are shared)."""
    per_topology = _EFFECTIVE.setdefault(topology, {})
    key = (protocol, profile.name)
    if key not in per_topology and _unscaled(topology, profile.efficiency[protocol]):
        per_topology[key] = topology
    if key not in per_topology:
        graph = topology.graph.copy()
        for u, v, data in graph.edges(data=True):
            share = profile.efficiency[protocol][LINK_CLASS.get(data["kind"], "nvlink")]
            graph.edges[u, v]["bandwidth_Bps"] = data["bandwidth_Bps"] * share
        scaled = Topology(f"{topology.name}[{protocol}]", graph, topology.router,
                          topology.description, topology.meta)
        _SCALED_FROM[scaled] = routing_base(topology)
        per_topology[key] = scaled
    return per_topology[key]


def _unscaled(topology: Topology, efficiency: dict[str, float]) -> bool:
    """Whether every link kind of *topology* runs at efficiency 1 under *efficiency* (per
    class)."""
    return all(efficiency[LINK_CLASS.get(kind, "nvlink")] == 1.0 for kind in set(topology.links.kind))
