"""A job's link counts written out: the side table of every directed link's bytes and busy
time (CSV) and the topology coloured by utilization (PNG) beside it. The counts themselves
are the training layer's (:mod:`atpsim.training.links`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import astuple, fields
from pathlib import Path

from atpsim.errors import SimulationError
from atpsim.report.topology_plot import draw_link_usage as draw_cables
from atpsim.topology.graph import Topology
from atpsim.training.config import JobConfig
from atpsim.training.job import load_machine, run_job
from atpsim.training.links import LinkUse, link_label, link_uses


def write_link_table(path: str | Path, uses: Sequence[LinkUse]) -> Path:
    """*uses* as a CSV side table (one row per directed link, units in the column names)."""
    target = Path(path)
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f.name for f in fields(LinkUse)])
        writer.writerows(astuple(u) for u in uses)
    return target


def draw_link_usage(topology: Topology, uses: Sequence[LinkUse], path: str | Path, title: str,
                    named: int = 5) -> Path:
    """The topology's links that carried traffic, coloured by utilization, the *named*
    busiest labelled (:func:`atpsim.report.topology_plot.draw_link_usage`)."""
    per_cable: dict[tuple[str, str], float] = {}
    for use in uses:
        key = (use.src, use.dst) if use.src < use.dst else (use.dst, use.src)
        per_cable[key] = max(per_cable.get(key, 0.0), use.utilization)
    labels = [link_label(u) for u in uses[:named]]
    return draw_cables(topology, per_cable, labels, path, title)


def write_job_links(topology: str | Mapping[str, object], config: JobConfig, path: str | Path, *,
                    hardware: str | None = None) -> list[LinkUse]:
    """Simulate *config* on *topology* counting every link, write the side table to *path*
    (CSV) and the topology coloured by utilization beside it (same name, ``.png``); returns
    the links busiest first."""
    target = Path(path)
    if not target.resolve().parent.is_dir():
        raise SimulationError(f"no folder to write the link table into: {target.parent}", param="path")
    topo, profile = load_machine(topology, config.layout.size, hardware)
    prediction = run_job(topo, profile, config, links=True)
    uses = link_uses(topo, prediction)
    write_link_table(target, uses)
    layout = config.layout
    draw_link_usage(topo, uses, target.with_suffix(".png"),
                    f"{config.model.name}: tp {layout.tp}, pp {layout.pp}, dp {layout.dp}, link busy share")
    return uses
