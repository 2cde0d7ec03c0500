"""Time one training step: a program on every rank's streams, collectives by a backend.

Chains the stages for one point: the program of the model on its tensor-parallel plan (the
scheme's builder, :mod:`atpsim.parallel.schemes`), compute durations from the
hardware profile (:mod:`atpsim.compute.timing`), collective durations from a collective timer
backend (:mod:`atpsim.engine.backends`: the link-level engine by default, every group of a
mesh dimension at once, or the closed forms), and the two-stream list scheduler
(:func:`atpsim.engine.step.scheduler.simulate_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import numpy as np

from atpsim.collectives.registry import algorithm_names
from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import compute_time_s
from atpsim.engine.backends import backend_method, charges_call_cost, get_backend
from atpsim.engine.joint.calls import CallSpec, plan_call
from atpsim.engine.methods import find
from atpsim.engine.step.scheduler import CommTiming, StepTimeline, simulate_step
from atpsim.parallel.schemes import TPPlan, build_tp_program
from atpsim.program import CommOp, ComputeOp, StepProgram
from atpsim.topology.graph import Topology

#: Collectives whose algorithm the scenario does not choose run as rings (NCCL's default for
#: all-gather and reduce-scatter) on the backends that take registry names; the NCCL backend
#: takes every name :func:`atpsim.collectives.nccl.nccl_algorithm_names` lists and runs ``auto``
#: for the rest. A scenario's `algorithm` applies to all-reduce.
_FALLBACK_ALGORITHM = "ring"
#: The collective timer backend a step uses unless told otherwise: each call as NCCL runs it
#: (channels, protocol, algorithm) on the link-level engine.
DEFAULT_BACKEND = "nccl"


class GroupSource(Protocol):
    """What the comm timer needs of a mesh or grid: its size and each dimension's groups."""

    @property
    def size(self) -> int: ...

    def groups(self, dim: int) -> list[list[int]]: ...


@dataclass(frozen=True)
class StepResult:
    """Times of one simulated step on its critical rank (the one that finishes last), in s."""

    timeline: StepTimeline
    step_time_s: float
    compute_time_s: float
    comm_time_s: float
    exposed_comm_s: float


def simulate_des_step(topology: Topology, profile: HardwareProfile, model: ModelConfig,
                      tp: TPPlan, chunks: int, algorithm: str, *,
                      backend: str = DEFAULT_BACKEND) -> StepResult:
    """Run *model* with the tensor-parallel plan *tp* (ATP's DeviceMesh, a SUMMA Grid or a
    SageMakerGroup: the program of its scheme, :mod:`atpsim.parallel.schemes`) over
    *topology* (first ``tp.size`` GPUs) and time the step."""
    program = build_tp_program(model, tp, chunks)
    return simulate_program(topology, profile, model, program, tp, algorithm, backend=backend)


def simulate_program(topology: Topology, profile: HardwareProfile, model: ModelConfig,
                     program: StepProgram, grid: GroupSource, algorithm: str, *,
                     backend: str = DEFAULT_BACKEND, ranks: Sequence[int] | None = None,
                     rank_scale: np.ndarray | None = None) -> StepResult:
    """Time *program* on the first ``grid.size`` GPUs of *topology*; *grid* (a DeviceMesh or
    a Grid) names the GPUs of each communication dimension's groups, and *backend* (a name
    of :func:`atpsim.engine.backends.backend_names`) times the collectives. *ranks*: the
    GPUs the program's ranks ``0 .. grid.size - 1`` are, where they are not those (the
    groups then name these GPUs); *rank_scale*: each rank's compute time factor."""
    timer = compute_timer(profile, model.dtype)
    overhead_s = 0.0 if charges_call_cost(backend, topology) else call_overhead_s(profile)
    comm_timer = _comm_timer(topology, grid, algorithm, overhead_s, backend, ranks)
    timeline = simulate_step(program, grid.size, timer, comm_timer, rank_scale)
    if backend_method(backend).on_network:
        timeline = _on_one_network(timeline, topology, grid, algorithm, overhead_s, backend, ranks,
                                   timer, rank_scale)  # fmt: skip
    rank = timeline.critical_rank()
    overhead_s = model.layers * layer_overhead_s(profile)
    return StepResult(
        timeline=timeline,
        step_time_s=timeline.step_time_s + overhead_s,
        compute_time_s=timeline.busy_s(rank, "compute") + overhead_s,
        comm_time_s=timeline.busy_s(rank, "comm"),
        exposed_comm_s=timeline.exposed_comm_s(rank),
    )


def _on_one_network(timeline: StepTimeline, topology: Topology, grid: GroupSource, algorithm: str,
                    overhead_s: float, backend: str, ranks: Sequence[int] | None,
                    compute_timer: Callable[[ComputeOp], float],
                    rank_scale: np.ndarray | None) -> StepTimeline:
    """*timeline* where the list schedule is the joint network's answer, else the step run
    on the joint network (:mod:`atpsim.engine.step.joint_step`)."""
    # lazy: the joint network (and scipy) load only when a step runs on one network
    from atpsim.engine.joint.network import JointNetwork
    from atpsim.engine.step.joint_step import joint_step, list_is_exact  # lazy: as above

    calls = step_calls(grid, algorithm, overhead_s, backend, ranks)
    network = JointNetwork(topology)
    if list_is_exact(timeline, calls, network):
        return timeline
    return joint_step(timeline.program, grid.size, compute_timer, calls, network, rank_scale)


def step_calls(grid: GroupSource, algorithm: str, overhead_s: float = 0.0,
               backend: str = DEFAULT_BACKEND, ranks: Sequence[int] | None = None
               ) -> Callable[[CommOp], tuple[CallSpec, list[list[int]]] | None]:
    """``calls(op)``: the collective call a comm op of a step issues (:func:`comm_spec`) and
    its groups in the program's rank numbering (None for groups of one rank)."""
    position = {int(r): i for i, r in enumerate(ranks)} if ranks is not None else None

    @cache
    def calls(op: CommOp) -> tuple[CallSpec, list[list[int]]] | None:
        groups = grid.groups(op.dim)
        if len(groups[0]) == 1:
            return None
        spec = comm_spec(op, groups, algorithm, backend, overhead_s)
        local = [list(g) for g in spec.groups] if position is None else \
            [[position[r] for r in g] for g in spec.groups]
        return spec, local

    return calls


def call_overhead_s(profile: HardwareProfile) -> float:
    """The profile's fixed cost per collective call (``collective_overhead_s``, 0 unless a
    profile sets it), which a backend without its own per-call cost adds to each call."""
    return float(getattr(profile, "collective_overhead_s", 0.0) or 0.0)


def layer_overhead_s(profile: HardwareProfile) -> float:
    """The profile's fixed time per layer outside the modelled ops (``layer_overhead_s``, 0
    unless a profile sets it): the framework's per-layer host work and the step's work outside
    the transformer layers (embedding, loss, optimizer), amortised per layer. It runs on the
    compute stream after the layer's ops, so it adds to compute and step time alike."""
    return float(getattr(profile, "layer_overhead_s", 0.0) or 0.0)


def compute_timer(profile: HardwareProfile, dtype: str) -> Callable[[ComputeOp], float]:
    """``timer(op)``: the seconds compute op *op* takes on *profile* in *dtype*
    (:func:`~atpsim.compute.timing.compute_time_s`), once per distinct op."""
    @cache
    def timer(op: ComputeOp) -> float:
        return float(compute_time_s(op, profile, dtype))

    return timer


def _comm_timer(topology: Topology, grid: GroupSource, algorithm: str, overhead_s: float = 0.0,
                backend: str = DEFAULT_BACKEND, ranks: Sequence[int] | None = None
                ) -> Callable[[CommOp], CommTiming]:
    """Durations of each collective per group: the *backend*'s time plus *overhead_s* (the
    profile's fixed per-collective cost where the backend has none of its own: kernel launch
    and the library's synchronisation, which move no bytes). An op whose algorithm the
    registry lacks runs :data:`_FALLBACK_ALGORITHM` (the NCCL backend chooses its own). A broadcast or
    reduce runs from (to) position ``op.root`` of each group: the group is rotated to start
    there."""
    group_times = get_backend(backend)
    planned = backend_method(backend).on_network  # its call's plan holds the same numbers
    position = {} if ranks is None else {int(r): i for i, r in enumerate(ranks)}

    @cache
    def timer(op: CommOp) -> CommTiming:
        groups = grid.groups(op.dim)
        if len(groups[0]) == 1:
            return CommTiming.of(groups, [0.0] * len(groups))
        spec = comm_spec(op, groups, algorithm, backend, overhead_s)
        if planned:
            times = plan_call(spec, topology).alone_s
        else:
            times = np.asarray(group_times(topology, op.collective, spec.algorithm, spec.groups,
                                           op.bytes)) + overhead_s  # fmt: skip
        local = spec.groups if ranks is None else [[position[r] for r in g] for g in spec.groups]
        return CommTiming.of([list(g) for g in local], times)

    return timer


def comm_spec(op: CommOp, groups: list[list[int]], algorithm: str, backend: str = DEFAULT_BACKEND,
              overhead_s: float = 0.0) -> CallSpec:
    """The collective call *op* issues on *groups* as the step simulator runs it: the
    algorithm (:data:`_FALLBACK_ALGORITHM` where the registry lacks it; the NCCL backend
    chooses its own), each group rotated to start at ``op.root``, *overhead_s* per call."""
    rotated = tuple(map(tuple, groups)) if op.root == 0 else \
        tuple(tuple(g[op.root:] + g[: op.root]) for g in groups)
    method = find("backend", backend)
    own = method is not None and method.nccl
    chosen = algorithm if own or algorithm in algorithm_names(op.collective) else _FALLBACK_ALGORITHM
    return CallSpec(backend, op.collective, chosen, rotated, op.bytes, overhead_s)
