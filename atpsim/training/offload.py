"""Activation offloading (``offload_activations``): a stage's stored activations copied to host
memory after each forward and back before the backward, over the GPU's PCIe link.

After the SageMaker model-parallelism paper (Karakus et al. 2021, Appendix H.3 and I.1's
``offload_activations``): the activations a micro-batch's forward stores (with activation
checkpointing, only the checkpointed ones) go to CPU RAM, and those of the micro-batch whose
backward comes next are fetched back before it (prefetched ``activation_loading_horizon``
ahead), the other micro-batches' staying on the host.

* **Memory**: a rank keeps one model chunk's activations of one micro-batch (the one in its
  forward or backward, ``L/(p·v)`` layers) in place of the 1F1B schedule's micro-batches in
  flight (``p - s`` on stage ``s``); the prefetch buffer of the next micro-batch and the copy
  in flight are transient, not counted (as the module
  :mod:`atpsim.parallel.job_memory` counts no transient buffer). The bytes are what the job's
  ``recompute`` keeps per layer (``full``: each layer's input, the paper's checkpointed
  activations; atpsim also offloads what ``selective`` or ``none`` keep).
* **Time**: each forward copies its chunk's stored bytes out and each backward fetches them
  back, ``bytes / B`` seconds at the GPU's PCIe bandwidth ``B`` per direction (full duplex, so
  the copies out and in do not share it). A copy overlaps the compute of its own pass: the
  copy out layer by layer as the forward's layers run, the fetch layer by layer ahead of the
  backward's (its recomputation included), as ``activation_loading_horizon`` prefetches. The
  excess of the copy over the pass's compute is exposed and added to the pass.
* **Bandwidth**: the slowest PCIe link (kind ``pcie``) of the job's GPUs: ``ib-cluster``'s
  GPU-to-NIC x16 link (GPUDirect RDMA's path, the host's root complex behind it), ``pcie-tree``'s
  GPU link; a GPU with no PCIe link in its topology (``nvswitch``, ``nvl72``) uses a PCIe
  Gen4 x16 link, 31.5 GB/s per direction (:data:`FALLBACK_HOST_BPS`; a GB200's Grace host
  link, NVLink-C2C, is far faster, so there the copies' cost is an upper bound).

Not modelled: the copies sharing the PCIe link with the NIC's traffic (GPUDirect RDMA of the
data-parallel all-reduce and the pipeline sends), the host memory's own bandwidth and the CPU
threads that drive the copies; ``partition: auto`` balances the stages' compute without them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

from atpsim.errors import SimulationError
from atpsim.parallel.job_memory import Recompute, activation_bytes_per_microbatch
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.pcie import PCIE_X16_BPS
from atpsim.topology.graph import Topology

if TYPE_CHECKING:
    from atpsim.training.config import JobConfig

#: A GPU's host link where its topology names none: PCIe Gen4 x16, 31.5 GB/s per direction
#: (16 GT/s per lane, 128b/130b encoding; an A100's link).
FALLBACK_HOST_BPS = PCIE_X16_BPS[4]


def check_offload(value: object) -> None:
    """``offload_activations`` is a bool (True or False, not 1 or "yes"); a SimulationError
    keyed ``offload_activations`` else."""
    if not isinstance(value, bool):
        raise SimulationError(f"expected offload_activations true or false, got {value!r}",
                              key="offload_activations")  # fmt: skip


def host_link_Bps(topology: Topology, ranks: list[int] | range) -> float:
    """Bytes/s per direction of the slowest PCIe link (kind ``pcie``) of GPUs *ranks*; a GPU
    without one counts :data:`FALLBACK_HOST_BPS`."""
    slowest = float("inf")
    for rank in ranks:
        node = topology.gpu(rank)
        pcie = [d["bandwidth_Bps"] for _, _, d in topology.graph.edges(node, data=True) if d.get("kind") == "pcie"]
        slowest = min(slowest, min(pcie) if pcie else FALLBACK_HOST_BPS)
    return slowest if slowest != float("inf") else FALLBACK_HOST_BPS


def chunk_offload_bytes(config: JobConfig, stage: int) -> float:
    """Bytes one forward of *stage* stores for one micro-batch and offloads (its model chunk's
    ``L/(p·v)`` layers at :func:`~atpsim.parallel.job_memory.activation_bytes_per_microbatch`
    each), which its backward fetches back."""
    mesh = config.layout.tp if isinstance(config.layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    per_layer = activation_bytes_per_microbatch(
        replace(config.model, batch=config.micro_batch), mesh, cast(Recompute, config.recompute),
        config.sequence_parallel, config.layout.ep, config.layout.cp)  # fmt: skip
    return per_layer * config.chunk_layers(stage)


def exposed_copy_s(copy_bytes: float, bandwidth_Bps: float, compute_s: float) -> float:
    """The part of a copy of *copy_bytes* at *bandwidth_Bps* that *compute_s* of compute does
    not hide: ``max(0, bytes / B - compute_s)`` seconds."""
    return max(0.0, copy_bytes / bandwidth_Bps - compute_s)
