"""What crossed where: per directed link, the bytes a job's iteration moved over it and the
time it carried at least one flow, from the joint network (:mod:`atpsim.engine.joint`).

*utilization* is busy time / iteration time; *load* is bytes / (bandwidth x iteration time),
the average share of the link's capacity used. The counts cover the calls the iteration's
task graph holds: pipeline sends, gradient buckets, the ZeRO all-gather, the tied embedding's
all-reduce, and the passes' TP collectives where the passes run as their own tasks; a pass
timed as one delay (its TP traffic proven to meet nothing else) adds nothing, so NVLink
inside a node then reads idle (the stats say ``passes_as_delays``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.engine.joint.graph import GraphTimeline
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology
from atpsim.training.job import JobPrediction


@dataclass(frozen=True)
class LinkUse:
    """One directed link's traffic in an iteration (module docstring)."""

    src: str
    dst: str
    kind: str
    bandwidth_Bps: float
    bytes: float
    busy_s: float
    utilization: float
    load: float


def link_uses(topology: Topology, prediction: JobPrediction) -> list[LinkUse]:
    """Every directed link that carried bytes, busiest first (ties: more bytes first)."""
    if prediction.link_bytes is None or prediction.link_busy_s is None:
        raise SimulationError("the prediction has no link counts; simulate it with links=True",
                              key="links")  # fmt: skip
    table, t = topology.links, prediction.iteration_time_s
    used = np.flatnonzero(prediction.link_bytes > 0)
    order = used[np.lexsort((-prediction.link_bytes[used], -prediction.link_busy_s[used]))]
    return [LinkUse(topology.nodes[table.src[i]], topology.nodes[table.dst[i]], table.kind[i],
                    float(table.bandwidth_Bps[i]), float(prediction.link_bytes[i]),
                    float(prediction.link_busy_s[i]), float(prediction.link_busy_s[i]) / t,
                    float(prediction.link_bytes[i]) / (float(table.bandwidth_Bps[i]) * t))
            for i in order.tolist()]  # fmt: skip


def link_label(use: LinkUse) -> str:
    return f"{use.src}->{use.dst}"


def busiest_columns(topology: Topology, prediction: JobPrediction) -> dict[str, object]:
    """Results columns: the busiest link's utilization and name (empty without counts)."""
    if prediction.link_bytes is None:
        return {}
    uses = link_uses(topology, prediction)
    if not uses:
        return {"max_link_utilization": 0.0, "busiest_link": ""}
    return {"max_link_utilization": uses[0].utilization, "busiest_link": link_label(uses[0])}


def link_counters(topology: Topology, run: GraphTimeline, top: int = 8) -> dict[str, list[tuple[float, int]]]:
    """For the *top* busiest links of *run* (by busy time): how many calls are in flight on
    each over time (a step at every call's start and end), named ``src->dst``."""
    if run.calls is None or run.link_busy_s is None:
        return {}
    busiest = [int(i) for i in np.argsort(-run.link_busy_s, kind="stable")[:top] if run.link_busy_s[i] > 0]
    table = topology.links
    out: dict[str, list[tuple[float, int]]] = {}
    for link in busiest:
        steps: dict[float, int] = {}
        for start, end, links in run.calls:
            if end > start and _crosses(links, link):
                steps[start] = steps.get(start, 0) + 1
                steps[end] = steps.get(end, 0) - 1
        level, points = 0, []
        for t in sorted(steps):
            level += steps[t]
            points.append((t, level))
        out[f"{topology.nodes[table.src[link]]}->{topology.nodes[table.dst[link]]}"] = points
    return out


def _crosses(links: np.ndarray, link: int) -> bool:
    """Whether the sorted link ids *links* hold *link*."""
    at = int(np.searchsorted(links, link))
    return at < len(links) and int(links[at]) == link
