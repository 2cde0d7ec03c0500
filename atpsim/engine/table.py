"""The nccl-tests-like sweep behind ``atpsim collective``: one row per buffer size.

Columns follow nccl-tests (PERFORMANCE.md): size (bytes), count (elements of *dtype*), time,
algbw = size / time, busbw = algbw x the op's factor (2(p-1)/p for all-reduce, (p-1)/p for
reduce-scatter, all-gather and all-to-all, 1 for broadcast). GB/s are 10^9 bytes/s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from atpsim.collectives.registry import check_algorithm, default_algorithm
from atpsim.engine.runner import run_collective
from atpsim.errors import SimulationError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.registry import did_you_mean
from atpsim.topology.spec import load_topology

#: Element sizes of nccl-tests' ``-d`` types (bytes).
DTYPE_BYTES = {"int8": 1, "uint8": 1, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
               "int32": 4, "uint32": 4, "float": 4, "fp32": 4, "int64": 8, "uint64": 8,
               "double": 8, "fp64": 8}

_MESH = re.compile(r"^dim([12]):(\d+)x(\d+)$")


@dataclass(frozen=True)
class CollectiveTable:
    """What the sweep ran on (*header*) and one dict per size (*rows*)."""

    header: dict[str, Any]
    rows: list[dict[str, Any]]


def parse_groups(text: str, n_available: int) -> tuple[list[list[int]], str]:
    """Groups from ``all`` (one group of the first *n_available* GPUs) or ``dimD:D1xD2`` (the
    groups of DeviceMesh(D1, D2) on mesh dimension D, placed row-major on the first GPUs)."""
    if text == "all":
        return [list(range(n_available))], f"all ({n_available} GPUs)"
    match = _MESH.match(text)
    if not match:
        raise SimulationError(f"expected 'all', 'dim1:D1xD2' or 'dim2:D1xD2', got {text!r}", key="--groups")
    dim, d1, d2 = (int(x) for x in match.groups())
    if d1 * d2 > n_available:
        raise SimulationError(
            f"DeviceMesh({d1}, {d2}) needs {d1 * d2} GPUs, only {n_available} available", key="--groups"
        )
    groups = DeviceMesh(d1, d2).groups(dim)
    return groups, f"{len(groups)} x {len(groups[0])} (dimension {dim} of DeviceMesh({d1}, {d2}))"


def mesh_size(groups: str) -> int | None:
    """GPUs a ``dimD:D1xD2`` spec asks for, to size a scalable topology (None for ``all``)."""
    match = _MESH.match(groups)
    return int(match.group(2)) * int(match.group(3)) if match else None


def collective_table(
    topology: str,
    op: str,
    sizes: Sequence[int],
    *,
    algorithm: str | None = None,
    gpus: int | None = None,
    groups: str = "all",
    dtype: str = "float",
    engine: str = "auto",
) -> CollectiveTable:
    """Run *op* on *topology* for every size in *sizes* (bytes per rank, nccl-tests style)."""
    algorithm = algorithm or default_algorithm(op)
    check_algorithm(op, algorithm)
    if dtype not in DTYPE_BYTES:
        raise SimulationError(f"unknown dtype {dtype!r}{did_you_mean(dtype, DTYPE_BYTES)}", key="--dtype")
    topo = load_topology(topology, n_gpus=gpus or mesh_size(groups), source="--topology")
    if gpus is not None and not 1 <= gpus <= topo.n_gpus:
        raise SimulationError(f"expected 1 <= N <= {topo.n_gpus} GPUs, got {gpus}", key="--gpus")
    group_list, described = parse_groups(groups, gpus or topo.n_gpus)
    p = len(group_list[0])
    header = {"topology": topo.name, "op": op, "algorithm": algorithm, "p": p,
              "groups": described, "dtype": dtype, "engine": engine, "n_gpus": topo.n_gpus}
    rows = []
    for size in sizes:
        result = run_collective(topo, op, algorithm, group_list, float(size), engine=engine)
        rows.append({
            "size_bytes": int(size),
            "count": int(size) // DTYPE_BYTES[dtype],
            "time_us": result.time_s * 1e6,
            "algbw_GBps": result.algbw_Bps(size) / 1e9 if result.time_s > 0 else 0.0,
            "busbw_GBps": result.busbw_Bps(op, p, size) / 1e9 if result.time_s > 0 else 0.0,
            "engine": result.engine,
            "n_flows": result.n_flows,
        })
    return CollectiveTable(header, rows)
