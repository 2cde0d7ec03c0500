"""A lower bound on a job's iteration time: what a search uses to skip layouts that cannot be
among its fastest without simulating them.

The bound is the iteration with every communication at its least: each pipeline op takes its
parts' compute (:func:`~atpsim.training.passes.op_parts`: the GEMM model's time of every compute
op of each part's program on one rank, plus the part's delay after it: the per-layer overhead,
the recomputed attention core); without a machine every transfer and collective is free, with
one each pass's TP (EP, CP) collectives and each stage's gradient buckets and ZeRO-1 gather take
their call's least time there (:attr:`~atpsim.engine.joint.calls.CallPlan.lower_bound_s`: the
fixed latency plus the bytes through the GPU's own links or the group's busiest link at full
bandwidth, which no sharing can beat); the pipeline sends stay free and each stage's optimizer
step follows its last backward (and buckets).

Why it bounds the joint iteration (:func:`~atpsim.training.job.run_job`) and the isolated one:
an op's parts run one after another on a rank, a program's compute ops in order on the rank's
one compute stream, its collectives in order on its comm stream, and a pass folded into one
delay (its time alone) lasts at least as long as its tasks. Every task starts at the latest end
of its dependencies, so the end of the iteration is a max-plus expression of the tasks'
durations, non-decreasing in each: shortening every task to its bound cannot make it later.
The pipeline of the shortened ops is :func:`simulate_pipeline`'s, with the same op orders and
inputs. The activation offload copy and a perturbation's slower GPUs are left out (they only
lengthen the iteration). tests/training/test_bound.py holds the bound below the joint and the
isolated iteration on layouts of every kind.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import TypeVar

from atpsim.compute.hardware import HardwareProfile
from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.step.job import GradientSync, simulate_iteration
from atpsim.engine.step.run import compute_timer
from atpsim.parallel.pipeline import Pass, PipelineOp, stage_orders
from atpsim.program import CommOp, ComputeOp, StepProgram
from atpsim.topology.graph import Topology
from atpsim.training.calls import JobComm
from atpsim.training.config import JobConfig
from atpsim.training.job import job_stage_calls, optimizer_s
from atpsim.training.partition import resolve_partition
from atpsim.training.passes import JobPrograms, op_parts


def iteration_lower_bound_s(config: JobConfig, profile: HardwareProfile, topology: Topology | None = None,
                            *, gradients: bool = True) -> float:  # fmt: skip
    """Seconds no simulation of *config* on *profile* can beat (module docstring): the
    pipeline of compute-only ops, then each stage's optimizer step; on any network. With the
    *topology*, tighter: each pass's TP (EP, CP) collectives take at least their call's
    lower bound there (:attr:`~atpsim.engine.joint.calls.CallPlan.lower_bound_s`) on the
    pass's own schedule of one rank (a collective's dependants wait for it, each stream runs
    in order), and with *gradients* each stage's gradient buckets and parameter all-gather
    too (:func:`_syncs`). Each distinct call is planned (tens of ms; the job's run reuses
    the plans)."""
    config = resolve_partition(config, profile)
    programs = JobPrograms(config)
    parts = op_parts(profile, programs)
    timer = compute_timer(profile, config.model.dtype)
    machine = None if topology is None else (JobComm(topology, profile, config), JointNetwork(topology))
    span = _compute_span(timer) if machine is None else _pass_span(timer, *machine)
    seconds: dict[int, float] = {}  # by id: a program's tasks are long to hash

    def program_s(program: StepProgram) -> float:
        if id(program) not in seconds:
            seconds[id(program)] = span(program)
        return seconds[id(program)]

    @cache
    def part_s(stage: int, kind: Pass, chunk: int) -> float:  # an op's parts: not its micro-batch's
        return sum((program_s(p.program) if p.program is not None else 0.0) + p.after_s
                   for p in parts(stage, PipelineOp(kind, 0, chunk)))  # fmt: skip

    shape = config.shape
    syncs = _syncs(config, profile, machine if gradients else None)
    return simulate_iteration(stage_orders(config.schedule, shape), shape,
                              lambda stage, op: part_s(stage, op.kind, op.chunk), None, syncs).step_time_s


def _syncs(config: JobConfig, profile: HardwareProfile, machine: tuple[JobComm, JointNetwork] | None
           ) -> list[GradientSync]:  # fmt: skip
    """Each stage's work after its last backward: the optimizer step; with the *machine*,
    also its gradient buckets, each ready where the joint graph's is (a share of the last
    backward's span: its bound here) and one after another, and the ZeRO-1 parameter
    all-gather after the step, each its call's lower bound (the tied embedding's all-reduce
    and the experts' gather left out: nothing lost but tightness)."""
    if machine is None:
        return [GradientSync(optimizer_s=optimizer_s(profile, config, s)) for s in range(config.layout.pp)]
    comm, network = machine

    def least(call: CallSpec) -> float:
        return network.plan(call).lower_bound_s

    return [GradientSync(tuple(least(c) for c in calls.buckets), calls.ready_fraction, calls.overlap,
                         calls.optimizer_s, least(calls.gather) if calls.gather is not None else 0.0)
            for calls in job_stage_calls(comm, profile, config)]  # fmt: skip


def _compute_span(timer: Callable[[ComputeOp], float]) -> Callable[[StepProgram], float]:
    """A program's compute on one rank, its collectives free (s)."""
    return lambda program: sum(timer(op) for op in program.compute_ops())


def _pass_span(timer: Callable[[ComputeOp], float], comm: JobComm, network: JointNetwork
               ) -> Callable[[StepProgram], float]:  # fmt: skip
    """A program list-scheduled on one rank (:func:`~atpsim.engine.step.scheduler.
    simulate_step`'s rule: a task starts when its stream is free and its dependencies have
    ended), each collective its call's lower bound (s)."""

    @cache
    def comm_s(op: CommOp) -> float:
        return network.plan(comm.tp_call(op)).lower_bound_s

    def span(program: StepProgram) -> float:
        finish = [0.0] * len(program.tasks)
        free = {"compute": 0.0, "comm": 0.0}
        for task in program.tasks:
            start = max([free[task.stream], *(finish[d] for d in task.deps)])
            op = task.op
            finish[task.id] = free[task.stream] = start + (comm_s(op) if isinstance(op, CommOp) else timer(op))
        return max(finish, default=0.0)

    return span


Result = TypeVar("Result")


def simulate_fastest(configs: Sequence[JobConfig], bound: Callable[[JobConfig], float],
                     run: Callable[[JobConfig], Result], seconds: Callable[[Result], float], top: int,
                     track: Callable[[Sequence[JobConfig]], Iterable[JobConfig]] | None = None,
                     tighter: Callable[[JobConfig], float] | None = None,
                     ) -> tuple[list[tuple[JobConfig, Result]], int]:  # fmt: skip
    """*run* the *configs* in the order of their lower bounds (*bound*, seconds: e.g.
    :func:`iteration_lower_bound_s`), lowest first, until the next one's bound is above the
    *top*-th shortest iteration (*seconds* of a result) run so far: that config and every one
    after it cannot be among the *top* fastest, so the *top* fastest of what ran are those of
    every config, exactly. *tighter*, a dearer lower bound, is asked only of a config about
    to run once *top* have run; one above the *top*-th is skipped too. Returns what ran
    (config, result) and how many were skipped; *track* wraps the ordered configs as it would
    all of them (a progress bar)."""
    bounds = {id(config): bound(config) for config in configs}
    order = sorted(configs, key=lambda config: bounds[id(config)])
    ran: list[tuple[JobConfig, Result]] = []
    fastest: list[float] = []  # the iterations run so far, shortest first
    todo = iter(track(order) if track else order)
    try:
        for config in todo:
            if len(fastest) >= top:
                if bounds[id(config)] > fastest[top - 1]:
                    break
                if tighter is not None and tighter(config) > fastest[top - 1]:
                    continue
            result = run(config)
            ran.append((config, result))
            insort(fastest, seconds(result))
    finally:
        getattr(todo, "close", lambda: None)()  # a progress bar's generator ends its bar
    return ran, len(configs) - len(ran)
