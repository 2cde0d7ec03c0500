"""The fitted fabric as a custom topology: a star of P ranks on one switch.

For a CPU/gloo machine the "GPUs" are P processes that exchange messages through the kernel
(loopback TCP or shared memory): there is no link graph to measure, only what a transfer costs.
A star is the smallest topology with that behaviour: each rank has one full-duplex link to a
switch node, so a transfer crosses two links and costs ``2·latency + bytes / bandwidth`` and
no two transfers of a ring share a link (the closed form the fit used is then exact; the event
engine reproduces it, tests/calibrate). A single-node GPU box on NVSwitch is the same shape
(atpsim's ``nvswitch`` builder): a fit to its nccl-tests log maps onto it the same way.

The file is atpsim's custom topology YAML (:mod:`atpsim.topology.custom`), so a scenario can
name it (``topology: validation/measurements/<machine>/fitted/topology.yaml``).
"""

from __future__ import annotations

from typing import Any

from atpsim.calibrate.fit.link import LinkFit

#: Name of the switch node of the star.
SWITCH = "switch0"


def star_topology(
    n_ranks: int, fit: LinkFit, *, name: str = "fitted-star", description: str = ""
) -> dict[str, Any]:
    """The custom-topology mapping of a star of *n_ranks* ranks whose rank-to-rank path has the
    fitted bottleneck bandwidth and end-to-end latency (each of the two links: half of it)."""
    link_latency_s = fit.latency_s / 2.0
    nodes: list[dict[str, Any]] = [{"name": f"p{r}", "kind": "gpu"} for r in range(n_ranks)]
    nodes.append({"name": SWITCH, "kind": "switch", "level": 1})
    links = [
        {
            "a": f"p{r}",
            "b": SWITCH,
            "kind": "custom",
            "bandwidth": f"{fit.bandwidth_Bps / 1e9:.6g} GB/s",
            "latency": f"{link_latency_s * 1e6:.6g} us",
        }
        for r in range(n_ranks)
    ]
    return {
        "name": name,
        "description": description
        or (
            f"{n_ranks} ranks on one switch, fitted: {fit.bandwidth_Bps / 1e9:.4g} GB/s per "
            f"direction, {fit.latency_s * 1e6:.4g} us per rank-to-rank transfer"
        ),
        "routing": "up-down",
        "nodes": nodes,
        "links": links,
    }
