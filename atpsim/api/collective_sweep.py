"""`atpsim.collective`: an nccl-tests-like sweep of one collective, one row per buffer size.

Columns follow nccl-tests (PERFORMANCE.md): size (bytes), count (elements of *dtype*), time,
algbw = size / time, busbw = algbw x the op's factor (2(p-1)/p for all-reduce, (p-1)/p for
reduce-scatter, all-gather and all-to-all, 1 for broadcast). GB/s are 10^9 bytes/s. Each row
also says what NCCL would have run (:func:`atpsim.engine.nccl.run_nccl`): the algorithm
(``auto``: NCCL's tuner), the protocol (LL, LL128, Simple; ``none``: bare links, no protocol
cost) and the channels. *time_s* is what the step simulator charges for the same call: with a
protocol, NCCL's latency model is the per-call cost; with ``none`` (bare links, as the step's
``event`` backend runs them) the hardware profile's ``collective_overhead_s`` is added. On
the paper's theory fabrics (tori, the NVLink-Network switch) and custom graphs, which run no
NCCL, ``auto`` is ``none`` (:func:`protocol_run`): the bare links the step simulator times
there; a protocol named runs as asked.

With *uncertainty* = N, every size is also simulated on N seeded draws of the topology's fitted
parameters (its preset's fitted links, its NCCL profile's fit; the same draws for every size,
:mod:`atpsim.api.uncertainty`), and :attr:`CollectiveSweep.uncertainty` holds the p10/p50/p90
of each size's time and busbw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from atpsim.calibrate.uncertainty.apply import ParameterDraw, drawn_topology
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.summary import Interval
from atpsim.collectives.channels import check_channels
from atpsim.collectives.closed_form import bus_factor
from atpsim.collectives.nccl import check_channels_used, check_nccl_algorithm
from atpsim.collectives.protocols import check_protocol, runs_nccl
from atpsim.compute.hardware import DEFAULT_HARDWARE, load_profile, topology_hardware
from atpsim.engine.nccl import run_nccl
from atpsim.errors import AtpsimError, SimulationError, did_you_mean, param
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology
from atpsim.units import buffer_bytes, parse_size_range

#: Element sizes of nccl-tests' ``-d`` types (bytes).
DTYPE_BYTES = {"int8": 1, "uint8": 1, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
               "int32": 4, "uint32": 4, "float": 4, "fp32": 4, "int64": 8, "uint64": 8,
               "double": 8, "fp64": 8}

_MESH = re.compile(r"^dim([12]):(\d+)x(\d+)$")


@dataclass(frozen=True)
class CollectiveRow:
    """One buffer size: nccl-tests' columns plus the engine's path and flow count."""

    size_bytes: int
    count: int
    time_s: float
    algbw_Bps: float
    busbw_Bps: float
    path: str
    n_flows: int
    algorithm: str = ""
    protocol: str = ""
    channels: int = 1
    overhead_s: float = 0.0


@dataclass(frozen=True)
class CollectiveInterval:
    """One size's time (s) and busbw (bytes/s) percentiles over the draws."""

    size_bytes: int
    time_s: Interval
    busbw_Bps: Interval


@dataclass(frozen=True)
class CollectiveUncertainty:
    """The draws behind a sweep's intervals: how many, the seed, the fits drawn, and one
    :class:`CollectiveInterval` per row."""

    draws: int
    seed: int
    sources: tuple[str, ...]
    intervals: tuple[CollectiveInterval, ...]


@dataclass(frozen=True)
class CollectiveSweep:
    """What the sweep ran on and one :class:`CollectiveRow` per size, smallest first."""

    topology: str
    op: str
    algorithm: str
    p: int
    groups: str
    dtype: str
    engine: str
    n_gpus: int
    rows: tuple[CollectiveRow, ...]
    protocol: str = "auto"
    uncertainty: CollectiveUncertainty | None = None
    hardware: str = DEFAULT_HARDWARE


def parse_groups(text: str, n_available: int) -> tuple[list[list[int]], str]:
    """Groups from ``all`` (one group of the first *n_available* GPUs) or ``dimD:D1xD2`` (the
    groups of DeviceMesh(D1, D2) on mesh dimension D, placed row-major on the first GPUs)."""
    if text == "all":
        return [list(range(n_available))], f"all ({n_available} GPUs)"
    match = _MESH.match(text)
    if not match:
        raise SimulationError(f"expected 'all', 'dim1:D1xD2' or 'dim2:D1xD2', got {text!r}", param="groups")
    dim, d1, d2 = (int(x) for x in match.groups())
    if d1 * d2 > n_available:
        raise SimulationError(
            f"DeviceMesh({d1}, {d2}) needs {d1 * d2} GPUs, only {n_available} available", param="groups"
        )
    groups = DeviceMesh(d1, d2).groups(dim)
    return groups, f"{len(groups)} x {len(groups[0])} (dimension {dim} of DeviceMesh({d1}, {d2}))"


def mesh_size(groups: str) -> int | None:
    """GPUs a ``dimD:D1xD2`` spec asks for, to size a scalable topology (None for ``all``)."""
    match = _MESH.match(groups)
    return int(match.group(2)) * int(match.group(3)) if match else None


def collective(
    topology: str | Mapping[str, Any],
    op: str = "all_reduce",
    sizes: str | float | Sequence[float] = "8:1G",
    *,
    algorithm: str | None = None,
    devices: int | None = None,
    groups: str = "all",
    dtype: str = "float",
    engine: str = "auto",
    protocol: str = "auto",
    channels: int | None = None,
    uncertainty: int | None = None,
    seed: int = 0,
    memory_bytes: int | None = None,
) -> CollectiveSweep:
    """Simulate *op* by *algorithm* (default ``auto``: what NCCL's tuner picks; ``ring`` is
    NCCL's channel rings, one per NIC; ``ring-rank-order`` one ring in rank order) with
    *protocol* (``auto``, LL, LL128, Simple, or ``none`` for bare links; ``auto`` is
    ``none`` where NCCL does not run, :func:`protocol_run`) on *channels* channels (default:
    one per NIC rail) on *topology* for every buffer size in *sizes* (bytes per rank, nccl-tests' convention): a
    number, a size string (``"1 GiB"``, ``"64MB"``, nccl-tests' ``"1G"`` = 2^30), a doubling
    range ``"MIN:MAX"`` or a sequence of sizes. *devices* uses the first N GPUs (and sizes a
    scalable topology); *groups* is ``"all"`` or ``"dimD:D1xD2"`` (the groups of mesh
    dimension D of DeviceMesh(D1, D2)); *engine* is ``"auto"`` (every exact shortcut that
    applies), ``"reference"`` (the plain event run) or ``"longest-path"`` (an error where
    that solver is not exact). *uncertainty* = N adds N draws of the fitted parameters from
    *seed* (module docstring; about N + 1 times the cost). A ``reference`` run that would
    need more than *memory_bytes* (default: 80% of this machine's memory) is refused.
    Groups of one GPU (``devices=1``, ``"dim1:1xN"``) move nothing: every row takes 0 s with
    algbw and busbw 0 (:func:`~atpsim.engine.nccl.run_nccl`), the closed forms' answer for
    ``p = 1``.

    >>> import atpsim
    >>> sweep = atpsim.collective("ib-cluster:4x8", "all_reduce", "1 GiB")
    >>> round(sweep.rows[0].busbw_Bps / 1e9, 1) > 0
    True
    """
    algorithm = algorithm or "auto"
    _check_call(op, algorithm, protocol, channels, dtype)
    spec = topology if isinstance(topology, str) else dict(topology)
    draws = None if uncertainty is None else Draws(uncertainty, seed)
    topo = load_topology(spec, n_gpus=devices or mesh_size(groups), source=param("topology"))
    if draws is not None:
        _sources(spec, devices or mesh_size(groups))
    if devices is not None and not 1 <= devices <= topo.n_gpus:
        raise SimulationError(f"expected 1 <= N <= {topo.n_gpus} GPUs, got {devices}", param="devices")
    group_list, described = parse_groups(groups, devices or topo.n_gpus)
    p = len(group_list[0])
    hardware = topology_hardware(topo)
    protocol = protocol_run(topo, protocol)
    overhead_s = 0.0 if protocol != "none" else load_profile(hardware).collective_overhead_s
    call = _Call(op, algorithm, protocol, channels, engine, overhead_s, memory_bytes)
    rows = tuple(_row(topo, call, group_list, size, DTYPE_BYTES[dtype])
                 for size in buffer_sizes(sizes))  # fmt: skip
    drawn = None
    if draws is not None:
        drawn = _draws(spec, devices or mesh_size(groups), draws, call, group_list, rows,
                       DTYPE_BYTES[dtype])  # fmt: skip
    return CollectiveSweep(topo.name, op, algorithm, p, described, dtype, engine, topo.n_gpus,
                           rows, protocol, drawn, hardware)


def protocol_run(topology: Topology, protocol: str) -> str:
    """The protocol a call on *topology* runs when *protocol* is asked: ``auto`` on a fabric
    NCCL does not run on (the paper's theory fabrics, tori, custom graphs:
    :func:`~atpsim.collectives.protocols.runs_nccl`) is ``none``, bare links, as the step
    simulator times those calls (:func:`~atpsim.engine.backends.nccl_times`); a protocol
    asked for by name runs as asked."""
    return "none" if protocol == "auto" and not runs_nccl(topology) else protocol


def _check_call(op: str, algorithm: str, protocol: str, channels: int | None, dtype: str) -> None:
    """Refuse an algorithm NCCL does not run for *op*, an unknown *protocol* or *dtype*, or a
    channel count out of range or given to an algorithm that runs one channel, before any
    topology is built."""
    check_nccl_algorithm(op, algorithm)
    check_protocol(protocol)
    if channels is not None:
        check_channels(channels)
        check_channels_used(op, algorithm, channels)
    if dtype not in DTYPE_BYTES:
        raise SimulationError(f"unknown dtype {dtype!r}{did_you_mean(dtype, DTYPE_BYTES)}", param="dtype")


def _sources(spec: str | dict[str, Any], n_gpus: int | None) -> tuple[str, ...]:
    """The fits a draw of topology *spec* perturbs; refused when there are none."""
    # lazy: api.uncertainty loads the step simulator, which a plain sweep does not need
    from atpsim.api.uncertainty import require_sources, topology_sources

    sources = tuple(topology_sources(spec, n_gpus))
    require_sources(sources, f"topology {spec}")
    return sources


def _draws(spec: str | dict[str, Any], n_gpus: int | None, draws: Draws, call: _Call,
           groups: list[list[int]], rows: tuple[CollectiveRow, ...],
           element_bytes: int) -> CollectiveUncertainty:  # fmt: skip
    """Every row's size again on each drawn topology (the same draws for every size)."""
    sources = _sources(spec, n_gpus)
    topologies = [drawn_topology(spec, n_gpus, ParameterDraw(draws, i), param("topology"))
                  for i in draws.indices()]  # fmt: skip
    intervals = []
    for row in rows:
        drawn = [_row(t, call, groups, row.size_bytes, element_bytes) for t in topologies]
        intervals.append(CollectiveInterval(row.size_bytes, Interval.of([d.time_s for d in drawn]),
                                            Interval.of([d.busbw_Bps for d in drawn])))  # fmt: skip
    return CollectiveUncertainty(draws.n, draws.seed, sources, tuple(intervals))


def buffer_sizes(sizes: str | float | Sequence[float]) -> list[int]:
    """Sizes in bytes from a number, a size string, a ``MIN:MAX`` doubling range or a list;
    a malformed, negative, non-finite or absurd size (past
    :data:`~atpsim.units.MAX_BUFFER_BYTES`) is an AtpsimError about *sizes*."""
    try:
        if isinstance(sizes, str):
            found = parse_size_range(sizes)
        elif isinstance(sizes, (int, float)):
            found = [buffer_bytes(sizes)]
        else:
            found = [buffer_bytes(s) for s in sizes]
    except AtpsimError as error:
        raise AtpsimError(error.message, param="sizes") from None
    return found


@dataclass(frozen=True)
class _Call:
    """What every row of a sweep runs: *op* by *algorithm* with *protocol* on *channels*
    through *engine* (a reference run capped at *memory_bytes*), plus the profile's per-call
    *overhead_s*."""

    op: str
    algorithm: str
    protocol: str
    channels: int | None
    engine: str
    overhead_s: float
    memory_bytes: int | None = None


def _row(topo: Topology, call: _Call, groups: list[list[int]], size: int,
         element_bytes: int) -> CollectiveRow:
    ran = run_nccl(topo, call.op, call.algorithm, groups, float(size), protocol=call.protocol,
                   channels=call.channels, engine=call.engine, memory_bytes=call.memory_bytes)
    p = len(groups[0])
    moved = ran.time_s > 0
    time_s = ran.time_s + (call.overhead_s if moved else 0.0)
    algbw = size / time_s if moved else 0.0
    return CollectiveRow(
        size_bytes=int(size),
        count=int(size) // element_bytes,
        time_s=time_s,
        algbw_Bps=algbw,
        busbw_Bps=algbw * bus_factor(call.op, p),
        path=ran.path,
        n_flows=ran.n_flows,
        algorithm=ran.algorithm,
        protocol=ran.protocol,
        channels=ran.channels,
        overhead_s=call.overhead_s,
    )
