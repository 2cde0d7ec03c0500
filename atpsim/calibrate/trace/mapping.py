"""Map a profiled step's ops onto atpsim's program for the same layer (by name and shape).

The program is :func:`atpsim.parallel.atp.build_step_program` for the traced layer (one
layer, the traced mesh and chunks): every rank runs it (SPMD), so one rank's trace is one
copy of it per step. Three kinds, three rules:

* **GEMMs** by shape and phase: a program GEMM ``(batch, m, n, k)`` and a traced one match
  when their batch and inner dimension ``k`` agree and ``{m, n}`` are the same pair (a GEMM
  and its transpose are the same work; autograd computes some weight gradients transposed).
  Among GEMMs of one shape and phase, the i-th in the trace is the i-th in program order.
* **collectives** by name, payload and phase: ``all_reduce`` of the buffer, ``all_gather`` of
  each rank's shard (the program's bytes are the gathered output, so its payload is the bytes
  over the group size); again the i-th of a kind is the i-th in program order.
* **memory-bound ops** by position: the program's memory-bound ops between two GEMMs form a
  group, and so do the trace's leaf operators (or kernels) between the two GEMMs matched to
  them; a group's measured time is the sum of its trace ops (an unfused ``bias_dropout_add``
  is an add, a dropout and an add). Trace groups with no program group (copies the program
  does not have, e.g. the head scatter's ``contiguous``) are unattributed time.

Each program op (or memory group) gets one measured time per chunk and step it was matched in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from atpsim.calibrate.trace.reader import Kind, KinetoTrace, TraceOp
from atpsim.compute.models import ModelConfig
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.program import CommOp, ComputeOp, Task

#: Gap key of a memory group's GEMM neighbour that was not matched, and of a pass's end.
_UNKNOWN = -1
_END = -2
T = TypeVar("T")


@dataclass
class MatchedOp:
    """A program op (or a memory group: *ops* in program order) and the trace's times for it:
    *measured_s* one per chunk and step, *trace_names* the trace events' names."""

    key: str
    kind: Kind
    ops: tuple[ComputeOp | CommOp, ...]
    measured_s: list[float] = field(default_factory=list)
    trace_names: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class TraceMapping:
    """Every program op with its measured times, and what could not be placed: trace time
    (s, summed over steps) by kind that matched no program op, and program ops never seen;
    *unpaired* the trace's GEMMs and collectives (every step's) that matched no program op."""

    matched: tuple[MatchedOp, ...]
    unattributed_s: dict[str, float]
    missing: tuple[str, ...]
    steps: int
    unpaired: tuple[TraceOp, ...] = ()


def layer_program(model: ModelConfig, mesh: DeviceMesh, chunks: int) -> tuple[Task, ...]:
    """The tasks of one layer's step (the traced program)."""
    return build_step_program(model, mesh, chunks).tasks


def gemm_signature(phase: str, batch: int, m: int, n: int, k: int) -> tuple[object, ...]:
    """What a traced GEMM must share with a program GEMM: phase, batch, k and ``{m, n}``."""
    return (phase, batch, k, min(m, n), max(m, n))


def comm_payload_bytes(op: CommOp, mesh: DeviceMesh) -> float:
    """Bytes each rank hands the collective: an all-gather's shard, else the buffer."""
    group = mesh.d1 if op.dim == 1 else mesh.d2
    return op.bytes / group if op.collective == "all_gather" else op.bytes


def map_trace(trace: KinetoTrace, tasks: Sequence[Task], mesh: DeviceMesh) -> TraceMapping:
    """Match every step of *trace* to *tasks* (module docstring)."""
    entries: dict[str, MatchedOp] = {}
    unattributed: dict[str, float] = defaultdict(float)
    unpaired: list[TraceOp] = []
    for step in range(len(trace.step_s)):
        ops = [op for op in trace.ops if op.step == step]
        gemms = _zip(_gemm_tasks(tasks), [o for o in ops if o.kind == "gemm"], _gemm_key)
        comms = _zip([(t, _comm_key(t, mesh)) for t in tasks if isinstance(t.op, CommOp)],
                     [o for o in ops if o.kind == "comm"], _traced_comm_key)  # fmt: skip
        kinds: tuple[tuple[Kind, list[tuple[Task | None, TraceOp]]], ...] = (
            ("gemm", gemms), ("comm", comms))  # fmt: skip
        for kind, pairs in kinds:
            for task, traced in pairs:
                if task is None:
                    unattributed[kind] += traced.dur_s
                    unpaired.append(traced)
                else:
                    _record(entries, task.op.name, kind, (task.op,), traced.dur_s, [traced])
        memory = _memory_groups(tasks, ops, {id(o): t.id for t, o in gemms if t is not None})
        for group, traced_ops in memory:
            duration = sum(o.dur_s for o in traced_ops)
            if group is None:
                unattributed["memory"] += duration
            else:
                key = group_key(group)
                _record(entries, key, "memory", group, duration, traced_ops)
    missing = sorted({t.op.name for t in tasks} - {n for e in entries.values() for n in _names(e)})
    ordered = _in_program_order(entries, tasks)
    return TraceMapping(ordered, dict(unattributed), tuple(missing), len(trace.step_s),
                        tuple(unpaired))  # fmt: skip


def group_key(group: Sequence[ComputeOp | CommOp]) -> str:
    """``l0.a+l0.b`` for a memory group; ``l0.a x2`` when every chunk's copy is in it."""
    names = list(dict.fromkeys(op.name for op in group))
    repeat = len(group) // len(names)
    return "+".join(names) + (f" x{repeat}" if repeat > 1 and len(group) % len(names) == 0 else "")


def _record(entries: dict[str, MatchedOp], key: str, kind: Kind,
            ops: tuple[ComputeOp | CommOp, ...], duration_s: float,
            traced: Iterable[TraceOp]) -> None:  # fmt: skip
    entry = entries.setdefault(key, MatchedOp(key, kind, ops))
    entry.measured_s.append(duration_s)
    entry.trace_names.update(o.name for o in traced)


def _gemm_tasks(tasks: Sequence[Task]) -> list[tuple[Task, tuple[object, ...]]]:
    return [
        (t, gemm_signature(t.phase, t.op.batch, t.op.m, t.op.n, t.op.k))
        for t in tasks
        if isinstance(t.op, ComputeOp) and t.op.kind == "gemm"
    ]


def _gemm_key(op: TraceOp) -> tuple[object, ...] | None:
    return None if op.gemm is None else gemm_signature(op.phase, *op.gemm)


def _comm_key(task: Task, mesh: DeviceMesh) -> tuple[object, ...]:
    op = cast(CommOp, task.op)
    return (task.phase, op.collective, round(comm_payload_bytes(op, mesh)))


def _traced_comm_key(op: TraceOp) -> tuple[object, ...]:
    return (op.phase, op.collective, round(op.nbytes))


def _zip(program: list[tuple[Task, tuple[object, ...]]], traced: list[TraceOp],
         key) -> list[tuple[Task | None, TraceOp]]:  # fmt: skip
    """Pair each traced op with the next program task of its signature (None: none left)."""
    queues: dict[tuple[object, ...], list[Task]] = defaultdict(list)
    for task, signature in program:
        queues[signature].append(task)
    pairs: list[tuple[Task | None, TraceOp]] = []
    for op in traced:
        queue = queues.get(key(op))
        pairs.append((queue.pop(0) if queue else None, op))
    return pairs


def _memory_groups(tasks: Sequence[Task], ops: Sequence[TraceOp],
                   gemm_task: dict[int, int]) -> list[tuple[tuple[ComputeOp, ...] | None, list[TraceOp]]]:  # fmt: skip
    """Each trace gap before a GEMM (or at a pass's end) with the program group before the
    same GEMM (None: the program has no memory-bound op there)."""
    program: dict[tuple[str, int], tuple[ComputeOp, ...]] = {}
    items = [(t.phase, t.id if t.op.kind == "gemm" else None, t) for t in tasks
             if isinstance(t.op, ComputeOp)]  # fmt: skip
    for gap, group in _gaps(items):
        program[gap] = tuple(cast(ComputeOp, t.op) for t in group)
    compute = [(o.phase, gemm_task.get(id(o), _UNKNOWN) if o.kind == "gemm" else None, o)
               for o in ops if o.kind != "comm"]  # fmt: skip
    return [(program.get(gap) if gap[1] != _UNKNOWN else None, group)
            for gap, group in _gaps(compute)]  # fmt: skip


def _gaps(items: Iterable[tuple[str, int | None, T]]) -> list[tuple[tuple[str, int], list[T]]]:
    """Memory-bound items grouped by what ends the gap they sit in: ``(phase, id)`` of the
    GEMM after them (*id* None marks an item that is not a GEMM), or ``(phase, END)`` at the
    end of a pass."""
    groups: list[tuple[tuple[str, int], list[T]]] = []
    current: list[T] = []
    phase = ""
    for item_phase, gemm, item in items:
        if item_phase != phase and current:
            groups.append(((phase, _END), current))
            current = []
        phase = item_phase
        if gemm is None:
            current.append(item)
        elif current:
            groups.append(((phase, gemm), current))
            current = []
    if current:
        groups.append(((phase, _END), current))
    return groups


def _names(entry: MatchedOp) -> set[str]:
    return {op.name for op in entry.ops}


def _in_program_order(entries: dict[str, MatchedOp], tasks: Sequence[Task]) -> tuple[MatchedOp, ...]:
    first: dict[str, int] = {}
    for task in tasks:
        first.setdefault(task.op.name, task.id)
    return tuple(sorted(entries.values(), key=lambda e: first.get(e.ops[0].name, 0)))
