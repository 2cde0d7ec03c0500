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

import csv
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from atpsim.api.job import JobPrediction
from atpsim.api.job_config import JobConfig
from atpsim.engine.joint.graph import GraphTimeline
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology


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


def write_link_table(path: str | Path, uses: Sequence[LinkUse]) -> Path:
    """*uses* as a CSV side table (one row per directed link, units in the column names)."""
    target = Path(path)
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f.name for f in fields(LinkUse)])
        writer.writerows(astuple(u) for u in uses)
    return target


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


def draw_link_usage(topology: Topology, uses: Sequence[LinkUse], path: str | Path, title: str,
                    named: int = 5) -> Path:
    """The topology's links that carried traffic, coloured by utilization, the *named*
    busiest labelled (:func:`atpsim.report.topology_plot.draw_link_usage`)."""
    from atpsim.report.topology_plot import draw_link_usage as draw

    per_cable: dict[tuple[str, str], float] = {}
    for use in uses:
        key = (use.src, use.dst) if use.src < use.dst else (use.dst, use.src)
        per_cable[key] = max(per_cable.get(key, 0.0), use.utilization)
    labels = [link_label(u) for u in uses[:named]]
    return draw(topology, per_cable, labels, path, title)


def write_job_links(topology: str | Mapping[str, object], config: JobConfig, path: str | Path, *,
              hardware: str | None = None) -> list[LinkUse]:
    """Simulate *config* on *topology* counting every link, write the side table to *path*
    (CSV) and the topology coloured by utilization beside it (same name, ``.png``); returns
    the links busiest first."""
    from atpsim.api.job import _machine, run_job

    target = Path(path)
    if not target.resolve().parent.is_dir():
        raise SimulationError(f"no folder to write the link table into: {target.parent}", key="--links")
    topo, profile = _machine(topology, config.layout.size, hardware)
    prediction = run_job(topo, profile, config, links=True)
    uses = link_uses(topo, prediction)
    write_link_table(target, uses)
    layout = config.layout
    draw_link_usage(topo, uses, target.with_suffix(".png"),
                    f"{config.model.name}: tp {layout.tp}, pp {layout.pp}, dp {layout.dp}, link busy share")
    return uses


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


def write_job_trace(topology: Topology, run: GraphTimeline, path: str | Path) -> Path:
    """The iteration's tasks and its busiest links' counters as a Chrome/Perfetto trace."""
    from atpsim.report.trace import write_graph_trace

    if run.graph.labels is None:
        raise SimulationError("the iteration's graph has no labels to trace", key="trace")
    return write_graph_trace(path, run.graph.labels, run.start_s, run.finish_s, link_counters(topology, run))
