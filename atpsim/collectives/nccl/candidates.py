"""What NCCL's tuner weighs for one call: (algorithm, protocol) candidates, each planned, with
its fixed latency and a time it cannot beat, known before the engine times it.

The engine times the candidates and keeps the fastest (:func:`atpsim.engine.nccl.run_nccl`);
the lower bound lets it skip those that cannot win.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.channels import check_channels
from atpsim.collectives.nccl.algorithms import (
    auto_algorithms,
    check_channels_used,
    check_nccl_algorithm,
    check_nvls,
)
from atpsim.collectives.nccl.latency import fixed_latency_s, step_classes
from atpsim.collectives.nccl.plan import NcclPlan, plan_algorithm
from atpsim.collectives.protocols import (
    PROTOCOLS,
    check_protocol,
    effective_topology,
    link_row,
    topology_profile,
)
from atpsim.collectives.registry import build_schedule
from atpsim.collectives.schedule import Steps
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class Candidate:
    """One way NCCL could run a call: *plan* (the algorithm, its schedule and channels) with
    *protocol* (LL, LL128, Simple, or ``none``: bare links, no protocol cost)."""

    plan: NcclPlan
    protocol: str

    @property
    def algorithm(self) -> str:
        return self.plan.algorithm


class NcclPlanner:
    """NCCL's planning of one call, *op* on every group of *groups* of *topology* on
    *channels* channels (default: one per NIC rail): its candidates, and for each its fixed
    latency and a lower bound of its time. Plans and step classes are worked out once per
    algorithm, for all its protocols."""

    def __init__(self, topology: Topology, op: str, groups: Sequence[Sequence[int]],
                 channels: int | None = None):
        self.topology, self.op, self.groups, self.channels = topology, op, groups, channels
        self._plans: dict[str, NcclPlan] = {}
        self._classes: dict[str, list[str]] = {}

    def candidates(self, algorithm: str, protocol: str = "auto") -> list[Candidate]:
        """The candidates of *algorithm* (``auto``: :func:`~.algorithms.auto_algorithms`) with
        *protocol* (``auto``: every protocol), algorithm by algorithm; a SimulationError for an
        unknown protocol, channel count or algorithm, or NVLS where it cannot run."""
        check_protocol(protocol)
        if self.channels is not None:
            check_channels(self.channels)
        check_nccl_algorithm(self.op, algorithm)
        check_channels_used(self.op, algorithm, self.channels)
        algorithms = auto_algorithms(self.topology, self.op, self.groups) \
            if algorithm == "auto" else (algorithm,)
        if "nvls" in algorithms:
            check_nvls(self.topology, self.groups)
        return [Candidate(self.plan(a), p) for a in algorithms for p in _protocols(a, protocol)]

    def plan(self, algorithm: str) -> NcclPlan:
        """*algorithm* laid over the call's groups (:func:`~.plan.plan_algorithm`)."""
        if algorithm not in self._plans:
            self._plans[algorithm] = plan_algorithm(self.topology, self.op, algorithm,
                                                    self.groups, self.channels)
        return self._plans[algorithm]

    def fixed_s(self, candidate: Candidate) -> float:
        """The protocol's fixed latency of *candidate* (0 on bare links), s."""
        if candidate.protocol == "none":
            return 0.0
        plan = candidate.plan
        if plan.algorithm not in self._classes:
            self._classes[plan.algorithm] = step_classes(self.topology, self.op, plan, self.groups)
        return fixed_latency_s(self.topology, self.op, candidate.protocol, plan,
                               self._classes[plan.algorithm])

    def lower_bound_s(self, candidate: Candidate, nbytes: float) -> float:
        """A time *candidate* cannot beat for *nbytes* per rank: its fixed latency plus the
        longest any GPU needs to push out (or take in) its schedule's bytes through all its
        links at once, at the protocol's efficiency (each byte a GPU sends leaves over one of
        its own links; NVLS with Simple at NVLS's, :func:`~atpsim.collectives.protocols.link_row`)."""
        fixed = self.fixed_s(candidate)
        row = link_row(candidate.algorithm, candidate.protocol)
        links = self.topology if candidate.protocol == "none" else \
            effective_topology(self.topology, row, topology_profile(self.topology))
        schedule = build_schedule(self.op, candidate.plan.schedule, self.groups, nbytes)
        pushed = port_bound_s(schedule.steps, links)
        return fixed + float(pushed.max()) if pushed.any() else 0.0


def port_bound_s(steps: Steps, links: Topology) -> np.ndarray:
    """Per GPU, the seconds its links need at least to carry what *steps* have it send and
    receive, all of its links at once at their bandwidth in *links* (a protocol-scaled
    topology: :func:`~atpsim.collectives.protocols.effective_topology`); 0 for a GPU that
    moves nothing. No sharing can make a GPU's bytes leave or arrive faster."""
    sent, received = _bytes_per_gpu(steps, links.n_gpus)
    out_Bps, in_Bps = _gpu_port_Bps(links)
    return np.maximum(sent / out_Bps, received / in_Bps)


#: Each topology's GPUs' total out and in link bandwidth (B/s), once per topology object.
_PORTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _gpu_port_Bps(links: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU's links' bandwidth out and in, summed (B/s), in GPU order."""
    if links not in _PORTS:
        gpu = np.array([links.node_index[node] for node in links.gpu_nodes], dtype=np.int64)
        n_nodes, table = len(links.nodes), links.links
        _PORTS[links] = (np.bincount(table.src, weights=table.bandwidth_Bps, minlength=n_nodes)[gpu],
                         np.bincount(table.dst, weights=table.bandwidth_Bps, minlength=n_nodes)[gpu])
    return _PORTS[links]


def _protocols(algorithm: str, protocol: str) -> tuple[str, ...]:
    """The protocols *algorithm* runs with *protocol* asked (``auto``: every one it has): NVLS
    has Simple only (NCCL's NVLS kernels), the rest all three; a SimulationError for NVLS with
    LL or LL128."""
    own = ("Simple",) if algorithm == "nvls" else PROTOCOLS
    if protocol == "auto":
        return own
    if protocol not in (*own, "none"):
        raise SimulationError(f"NVLS runs NCCL's Simple protocol only, not {protocol}",
                              param="protocol")
    return (protocol,)


def _bytes_per_gpu(steps: Steps, n_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each GPU sends to and receives from other GPUs over all *steps* (each template
    counted once per step that runs it)."""
    sent, received = np.zeros(n_gpus), np.zeros(n_gpus)
    for template, count in steps.in_use():
        moved = np.where(template.src != template.dst, template.nbytes, 0.0)
        sent += count * np.bincount(template.src, weights=moved, minlength=n_gpus)
        received += count * np.bincount(template.dst, weights=moved, minlength=n_gpus)
    return sent, received
