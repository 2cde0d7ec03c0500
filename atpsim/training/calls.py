"""A job's communication as collective calls: the pipeline's sends, each stage's gradient
buckets, the ZeRO-1 parameter all-gather, the tied embedding's all-reduce, and the TP
collectives of the passes (:class:`~atpsim.engine.joint.calls.CallSpec`).

The same calls time the iteration either way: :func:`gradient_syncs` and
:func:`transfer_timer` turn them into the durations the list composition adds up (each call
alone, :func:`atpsim.engine.step.job.simulate_iteration`); :func:`job_calls` hands them to the
joint network (:mod:`atpsim.engine.step.job_graph`). :func:`tp_isolated` says whether every
stage's TP traffic is link-disjoint from every other call's and from the other stages' TP
traffic, so that a pass can be one delay of its time alone.

With expert parallelism (``ep`` > 1) a pass's MoE all-to-alls (:data:`~atpsim.parallel.moe.
EP_DIM`) are calls over every expert-parallel group of the job, on the same network as the
rest; the experts' gradients are reduced (and, with ZeRO-1, gathered) over their own
data-parallel groups of ``dp/ep`` replicas, after the dense part's buckets.

With context parallelism (``cp`` > 1) every context-parallel rank runs its replica's pipeline
(the job's pipelines are ``dp·cp``), a stage sends its ``s/cp`` tokens' activations, a pass's
ring attention sends (:data:`~atpsim.parallel.context.CP_DIM`) are point-to-point calls
(``sendrecv``: each rank to the next) over every context-parallel group, on the same network
as the rest, and the gradients are
reduced over the ``dp·cp`` pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

from atpsim.compute.hardware import HardwareProfile
from atpsim.engine.backends import charges_call_cost
from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.step.job import GradientSync
from atpsim.engine.step.job_graph import JobCalls, OpBuilder, OpsBuilder, StageCalls
from atpsim.engine.step.pipeline import TransferTime
from atpsim.engine.step.run import DEFAULT_BACKEND, comm_spec
from atpsim.parallel.context import CP_DIM
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import EP_DIM
from atpsim.parallel.pipeline import stage_orders
from atpsim.program import CommOp, StepProgram
from atpsim.topology.graph import Topology
from atpsim.training.config import JobConfig


def overhead_s(profile: HardwareProfile) -> float:
    """The profile's fixed cost per collective call (charged where the backend has none)."""
    return float(getattr(profile, "collective_overhead_s", 0.0) or 0.0)


@dataclass(frozen=True)
class JobComm:
    """The calls of one job on one machine (module docstring)."""

    topology: Topology
    profile: HardwareProfile
    config: JobConfig
    _sends: dict = field(default_factory=dict, compare=False, repr=False)
    _tp_calls: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def charged_s(self) -> float:
        """The per-call cost the default backend does not charge itself."""
        return 0.0 if charges_call_cost(DEFAULT_BACKEND, self.topology) else overhead_s(self.profile)

    def send(self, src: int, dst: int) -> CallSpec | None:
        """Every replica's send from stage *src* to *dst* (a 2-rank binomial broadcast of the
        stage's activations on bare links, plus the profile's per-call cost)."""
        if (src, dst) not in self._sends:
            self._sends[(src, dst)] = self._send(src, dst)
        return self._sends[(src, dst)]

    def _send(self, src: int, dst: int) -> CallSpec | None:
        layout = self.config.layout
        if src == dst or layout.pp == 1:
            return None
        pairs = tuple(layout.send_pairs(src, dst))
        return CallSpec("event", "broadcast", "binomial", pairs, activation_bytes(self.config),
                        overhead_s(self.profile))  # fmt: skip

    def collective(self, op: str, algorithm: str, groups: list[list[int]], nbytes: float) -> CallSpec:
        """*op* on every group at once by the default backend (NCCL as it runs)."""
        return CallSpec(DEFAULT_BACKEND, op, algorithm, tuple(map(tuple, groups)), nbytes, self.charged_s)

    def tp_call(self, op: CommOp) -> CallSpec:
        """A pass's TP collective *op* over every TP group of the job (an MoE all-to-all: over
        every expert-parallel group; a ring attention send: over every context-parallel
        group, :func:`pass_groups`): one object per op (a pass's tasks ask for it once
        per group of every replica and stage; building the call of every group each time made
        graph building quadratic in the replicas)."""
        if op not in self._tp_calls:
            groups = pass_groups(self.config.layout, op.dim)
            self._tp_calls[op] = comm_spec(op, groups, self.config.algorithm, DEFAULT_BACKEND, self.charged_s)
        return self._tp_calls[op]


def pass_groups(layout: ParallelLayout, dim: int) -> list[list[int]]:
    """The groups of a pass program's comm ops on *dim* over the whole job: the TP groups of
    mesh dimension *dim*, every expert-parallel group (:data:`EP_DIM`) or every
    context-parallel group, a ring attention step's sendrecv (:data:`CP_DIM`)."""
    if dim == EP_DIM:
        return layout.ep_groups()
    if dim == CP_DIM:
        return layout.cp_groups()
    return layout.tp_groups(dim)


def activation_bytes(config: JobConfig) -> float:
    """Bytes each rank sends at a stage boundary: its ``[T, h/d2]`` share of the activations
    (``T`` its ``s/cp`` tokens of each sequence with context parallelism)."""
    model, mesh = config.chunk_model, config.layout.tp
    d2 = mesh.d2 if isinstance(mesh, DeviceMesh) else 1
    return model.batch * (model.seq // config.layout.cp) * model.hidden / d2 * model.dtype_bytes


def stage_calls(comm: JobComm, stage: int, params: float, optimizer_s: float,
                expert_params: float = 0.0) -> StageCalls:
    """Stage *stage*'s gradient buckets (all-reduce, or reduce-scatter with ZeRO-1) over its
    DP groups, in issue order, each ready when the last backward has produced it; the
    optimizer step; the ZeRO-1 parameter all-gather. With expert parallelism, *expert_params*
    of the *params* are the experts', whose buckets (and gather) follow over their own
    ``dp/ep``-replica groups (none where ``ep = dp``: each expert is on one replica)."""
    config = comm.config
    layout, model = config.layout, config.model
    if layout.replicas == 1:
        return StageCalls(optimizer_s=optimizer_s)
    split = layout.ep > 1 and expert_params > 0
    groups = [g for g in layout.dp_groups() if layout.stage_of(g[0]) == stage]
    dense_bytes = (params - expert_params if split else params) * model.dtype_bytes
    grad_bytes = params * model.dtype_bytes
    sizes = buckets(dense_bytes, config.bucket_bytes)
    op = "reduce_scatter" if config.zero else "all_reduce"
    calls = tuple(comm.collective(op, config.algorithm, groups, n) for n in sizes)
    gather = comm.collective("all_gather", "auto", groups, dense_bytes) if config.zero else None
    expert_gather = None
    if split and layout.dp > layout.ep:
        experts = [g for g in layout.expert_dp_groups() if layout.stage_of(g[0]) == stage]
        expert_bytes = expert_params * model.dtype_bytes
        expert_sizes = buckets(expert_bytes, config.bucket_bytes)
        calls += tuple(comm.collective(op, config.algorithm, experts, n) for n in expert_sizes)
        sizes += expert_sizes
        if config.zero:
            expert_gather = comm.collective("all_gather", "auto", experts, expert_bytes)
    ready = tuple(min(1.0, sum(sizes[: k + 1]) / grad_bytes) for k in range(len(sizes)))
    return StageCalls(calls, ready, config.overlap_grad_reduce, optimizer_s, gather, expert_gather)


def buckets(total_bytes: float, bucket_bytes: float) -> list[float]:
    """Gradient bytes split into buckets of *bucket_bytes* (the last one smaller)."""
    full = int(total_bytes // bucket_bytes)
    rest = total_bytes - full * bucket_bytes
    return [bucket_bytes] * full + ([rest] if rest > 0 else [])


def tied_call(comm: JobComm, head_bytes: float) -> CallSpec | None:
    """The all-reduce of the tied embedding's gradient between the first and last stage
    (Megatron-LM's embedding group), every replica's pairs; None with one stage, no vocab or
    an untied LM head (``tie_embeddings: false``: the head's gradient is the last stage's own,
    reduced over DP with its others)."""
    layout = comm.config.layout
    if head_bytes == 0 or layout.pp == 1 or not comm.config.model.tie_embeddings:
        return None
    pairs = [list(pair) for pair in layout.send_pairs(0, layout.pp - 1)]
    return comm.collective("all_reduce", "auto", pairs, head_bytes)


def job_calls(comm: JobComm, stages: tuple[StageCalls, ...], tied: CallSpec | None,
              op: OpBuilder, together: OpsBuilder | None = None, fold: bool = False) -> JobCalls:
    """The iteration for :func:`~atpsim.engine.step.job_graph.build_job_graph`; *together*
    builds each op in every replica at once (passes whose all-to-alls span replicas); *fold*:
    replica 0 built for all of them (the folded graph of an unperturbed job)."""
    config = comm.config
    layout = config.layout
    orders = stage_orders(config.schedule, config.shape)
    built, fold_count = (1, layout.replicas) if fold else (layout.replicas, 0)
    return JobCalls(orders, config.shape, built, layout.tp.size, op, comm.send, stages, tied,
                    together, fold_count)  # fmt: skip


def ep_groups_of(layout: ParallelLayout, stage: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """The expert-parallel groups of *stage*: each one's index among
    :meth:`~atpsim.parallel.layout.ParallelLayout.ep_groups` and its members as (replica, TP
    position), for :meth:`~atpsim.engine.step.job_ops.ProgramOps.together`."""
    size, ep = layout.tp.size, layout.ep
    return [((block * layout.pp + stage) * size + t, [(block * ep + j, t) for j in range(ep)])
            for block in range(layout.dp // ep) for t in range(size)]  # fmt: skip


def cp_groups_of(layout: ParallelLayout, stage: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """The context-parallel groups of *stage*: each one's index among
    :meth:`~atpsim.parallel.layout.ParallelLayout.cp_groups` and its members as (pipeline
    replica ``d·cp + c``, TP position), for
    :meth:`~atpsim.engine.step.job_ops.ProgramOps.together`."""
    size, cp = layout.tp.size, layout.cp
    return [((d * layout.pp + stage) * size + t, [(d * cp + c, t) for c in range(cp)])
            for d in range(layout.dp) for t in range(size)]  # fmt: skip


def gradient_syncs(network: JointNetwork, stages: tuple[StageCalls, ...], tied: CallSpec | None
                   ) -> list[GradientSync]:
    """Each stage's buckets as durations, each call alone (the list composition's): the tied
    embedding's all-reduce appended as a last bucket on the first and last stage."""
    out = []
    for s, calls in enumerate(stages):
        times = tuple(_alone_s(network, c) for c in calls.buckets)
        ready = calls.ready_fraction
        gather_s = sum(_alone_s(network, c) for c in (calls.gather, calls.expert_gather) if c is not None)
        if tied is not None and s in (0, len(stages) - 1):
            times, ready = times + (_alone_s(network, tied),), ready + (1.0,)
        overlap = calls.overlap if calls.buckets else False
        out.append(GradientSync(times, ready, overlap, calls.optimizer_s, gather_s))
    return out


def transfer_timer(network: JointNetwork, comm: JobComm) -> TransferTime:
    """Seconds of the send from one stage to another, every replica's at once, alone."""

    @cache
    def between(src: int, dst: int) -> float:
        call = comm.send(src, dst)
        return _alone_s(network, call) if call is not None else 0.0

    return lambda src, dst, op: between(src, dst)


def _alone_s(network: JointNetwork, call: CallSpec) -> float:
    return float(network.plan(call).alone_s.max())


def tp_isolated(network: JointNetwork, comm: JobComm, programs: list[StepProgram],
                others: list[CallSpec]) -> bool:
    """Whether the TP collectives of *programs* (every TP group of the job) cross no link
    that *others* cross and no link another stage's TP groups cross: then each stage's pass
    meets nothing, and its time alone is exact. With expert parallelism a stage's passes in
    the ``ep`` replicas of an expert-parallel group run together (their all-to-alls join
    them), so they are one owner; with context parallelism, those of the ``cp`` pipelines of
    one replica (their ring attention sends join them)."""
    ops = {op for program in programs for op in program.comm_ops()}
    owned = []
    layout = comm.config.layout
    pp, together = layout.pp, layout.ep * layout.cp
    for op in ops:
        spec = comm.tp_call(op)
        group = np.arange(len(spec.groups))
        if op.dim in (EP_DIM, CP_DIM):
            owned.append((spec, group // layout.tp.size))
            continue
        replica, stage = np.divmod(group // len(layout.tp.groups(op.dim)), pp)
        owned.append((spec, (replica // together) * pp + stage))
    return network.disjoint(owned, others)

