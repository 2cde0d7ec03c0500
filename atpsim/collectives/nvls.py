"""NVLS: collectives reduced or multicast inside the NVSwitch (NVLink SHARP, H100 and later).

With NVLS each GPU pushes its whole buffer up its NVLink once (the switch reduces it with
``multimem.ld_reduce``) and takes the reduced buffer down once (the switch multicasts it with
``multimem.st``), the two directions pipelined at once (NVIDIA, "NVLink SHARP", NCCL 2.17
release notes; Hopper NVSwitch in-network reduction). So each GPU link carries ``n`` up and
``n`` down, concurrently, instead of the ring's ``2(p-1)/p n`` each way:

    T = alpha + n / B        busbw = 2(p-1)/p n / T -> 2(p-1)/p B   (1.75 B on 8 GPUs)

The engine moves GPU-to-GPU flows, so the switch's reduction is represented by the load it
puts on the links: one step in which every GPU sends ``n / (p - 1)`` to every other GPU, i.e.
``n`` up and ``n`` down each GPU's link, all at once -- the same link loads and, on a
non-blocking switch, the same time (:func:`nvls_time_s`). Reduction throughput inside the switch
is taken as unlimited (no measurement in the shared data), so the GPU link binds.

NCCL runs reduce-scatter and all-gather by NVLS too (NCCL 2.19 release notes). A reduce-scatter
has each GPU read its reduced shard through the switch (``multimem.ld_reduce``): the switch reads
every GPU's whole buffer, ``n`` up each link, and returns ``n / p`` down. An all-gather has each
GPU store its shard to every GPU at once (``multimem.st``): ``n / p`` up, ``n`` down. One
direction of each GPU link carries ``n``, so ``T = alpha + n / B`` as for the all-reduce, and the
same one-step pattern gives that time on a non-blocking switch. The pattern also loads the other
direction with ``n`` (where the switch moves ``n / p``): a flow network cannot show a switch
that reduces or copies, so under contention from other traffic it overstates that direction.
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, step
from atpsim.topology.graph import Topology

#: Collectives NCCL runs by NVLS (module docstring).
NVLS_OPS = ("all_reduce", "reduce_scatter", "all_gather")
#: NVLink generations whose NVSwitch reduces (NVLink SHARP): Hopper and later (third-generation
#: NVSwitch, DGX H100; NVLink Switch of HGX B200 and the GB200 NVL72 rack, NVIDIA's Blackwell
#: architecture brief: "NVLink SHARP" in-network reductions).
NVLS_GENERATIONS = frozenset({"h100", "b200", "gb200"})


def nvls_all_reduce(p: int, nbytes: float) -> Pattern:
    """One step: every GPU sends ``n / (p - 1)`` to every other (module docstring). Also the
    pattern of NVLS reduce-scatter and all-gather: one direction of each link carries ``n``."""
    if p < 2:
        return Steps.of(())
    src, dst = np.divmod(np.arange(p * p), p)
    keep = src != dst
    return Steps.of([step(src[keep], dst[keep], nbytes / (p - 1))])


def nvls_time_s(p: int, nbytes: float, bandwidth_Bps: float, latency_s: float) -> float:
    """The closed form of all-reduce, reduce-scatter and all-gather: ``alpha + n / B`` (0 for
    one rank)."""
    return 0.0 if p < 2 or nbytes == 0 else latency_s + nbytes / bandwidth_Bps


def has_nvls(topology: Topology) -> bool:
    """Whether *topology*'s GPUs sit on an NVSwitch of a generation with NVLink SHARP."""
    kinds = {d["kind"] for _, d in topology.graph.nodes(data=True)}
    return "nvswitch" in kinds and topology.meta.get("generation") in NVLS_GENERATIONS
