"""A step or an iteration as one task graph over the ranks: compute delays and collective
calls, with the dependencies that streams, programs and pipelines impose.

A task starts when every task it depends on has finished (at once, with none), so stream
order is a dependency on the stream's previous task, and a collective group's rendezvous (it
starts when its last member is ready) is a dependency on every member's previous task. Kinds:

- ``delay``: lasts *seconds* (compute, an optimizer step, a pass whose communication is proven
  to meet nothing else);
- ``marker``: a point part-way through a delay of *seconds* that starts with it: it ends at
  ``start + fraction·((start + seconds) - start)``, the list schedule's own arithmetic for "a
  gradient bucket is ready this far into the backward";
- ``comm``: groups *groups* (indices into the call's groups) of collective call *call*
  (:class:`~atpsim.engine.joint.calls.CallSpec`); it ends when the last of its groups does.
  Comm tasks of one call that start at the same instant run as one cohort (every group at
  once, as the list schedule times a call), and every flow in flight shares the links.

Task ids are issue order: a task depends only on earlier ones. *labels* (optional) name each
task's track and name for traces.

A *folded* graph (:mod:`atpsim.engine.step.job_graph`) builds one of several copies that run in
step (data-parallel replicas, the TP positions of a stage) and lets each of its comm tasks
stand for every copy's: its groups are all the copies' groups, in blocks of *block* groups (the
groups of one copy's task, consecutive in sorted order), and it is *uniform*: it is exact only
if every block ends at one instant (then every copy's chain is the built one's, to the bit).
The engine checks that at every end it announces and raises :class:`NotUniform` where it
fails; the caller then builds the graph unfolded.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from atpsim.engine.joint.calls import CallSpec
from atpsim.errors import SimulationError

DELAY, MARKER, COMM = 0, 1, 2


class NotUniform(SimulationError):
    """A uniform comm task's groups ended at different instants: the folded graph is not the
    unfolded one (module docstring). Raised to the code that folded it, which builds the
    graph unfolded; never a user's error."""


def uniform_end(task: int, ends: np.ndarray, block: int) -> float:
    """When uniform comm task *task* ends: the common end (s) of its blocks of *block* groups
    (*ends*: its groups', in sorted order); raises :class:`NotUniform` where the blocks' ends
    differ at all."""
    if block == 1:  # the common case (a TP collective's groups), without the reshape
        first = float(ends.max())
        if ends.min() == first:
            return first
    last = ends.reshape(-1, block).max(axis=1)
    first = float(last[0])
    if not np.all(last == first):
        raise NotUniform(f"task {task}: its copies end between {float(last.min())!r} and "
                         f"{float(last.max())!r} s; the folded copies are not in step")  # fmt: skip
    return first


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """Tasks as arrays (see the module docstring): *kind*, *seconds* (delay, marker),
    *fraction* (marker), *call* (comm; -1 otherwise), *groups* (comm), dependencies as CSR
    *dep_ptr*/*dep_idx*, the *calls*, *labels* ``(track, name)`` or None, and *uniform* (a
folded graph's: per task, the block size of a uniform comm task, 0 for any other; None:
none is)."""

    kind: np.ndarray
    seconds: np.ndarray
    fraction: np.ndarray
    call: np.ndarray
    groups: tuple[tuple[int, ...], ...]
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    calls: tuple[CallSpec, ...]
    labels: tuple[tuple[str, str], ...] | None = None
    uniform: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kind)

    def deps(self, task: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[task]:self.dep_ptr[task + 1]]


class GraphBuilder:
    """Builds a :class:`TaskGraph` task by task; each method returns the new task's id."""

    def __init__(self, labelled: bool = False):
        self._kind: list[int] = []
        self._seconds: list[float] = []
        self._fraction: list[float] = []
        self._call: list[int] = []
        self._groups: list[tuple[int, ...]] = []
        #: Each task's dependencies; None for a spliced task, whose are its template's
        #: (:attr:`_splices`: first task, base, start and template of each splice, in order).
        self._deps: list[Sequence[int] | None] = []
        self._splices: list[tuple[int, int, int, Template]] = []
        self._calls: dict[CallSpec, int] = {}
        self._by_id: dict[int, int] = {}
        self._kept: list[CallSpec] = []  # keeps the ids above valid
        self._labels: list[tuple[str, str]] | None = [] if labelled else None
        self._uniform: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._kind)

    @property
    def labelled(self) -> bool:
        return self._labels is not None

    def deps_of(self, task: int) -> tuple[int, ...]:
        """What task *task* waits for."""
        listed = self._deps[task]
        if listed is not None:
            return tuple(listed)
        first, base, start, template = self._splices[bisect.bisect_right(self._splices, task, key=lambda s: s[0]) - 1]
        return tuple(start if d == 0 else base + d for d in template.deps[task - first])

    def call(self, spec: CallSpec) -> int:
        """The index of *spec* among the graph's calls (added once; the same object is looked
        up by identity, so a call of thousands of groups is hashed once)."""
        known = self._by_id.get(id(spec))
        if known is not None:
            return known
        index = self._calls.setdefault(spec, len(self._calls))
        self._by_id[id(spec)] = index
        self._kept.append(spec)
        return index

    def delay(self, seconds: float, deps: Iterable[int] = (), label: tuple[str, str] | None = None) -> int:
        return self._add(DELAY, seconds, 0.0, -1, (), deps, label)

    def marker(self, fraction: float, seconds: float, deps: Iterable[int] = (),
               label: tuple[str, str] | None = None) -> int:
        return self._add(MARKER, seconds, fraction, -1, (), deps, label)

    def comm(self, call: int, groups: Iterable[int], deps: Iterable[int] = (),
             label: tuple[str, str] | None = None, block: int = 0) -> int:
        """A comm task; *block* > 0: a uniform task, standing for the copies of a folded graph,
        each copy *block* of its groups (module docstring)."""
        task = self._add(COMM, 0.0, 0.0, call, tuple(sorted(groups)), deps, label)
        if block:
            self._uniform[task] = block
        return task

    def _add(self, kind: int, seconds: float, fraction: float, call: int, groups: tuple[int, ...],
             deps: Iterable[int], label: tuple[str, str] | None) -> int:
        task = len(self._kind)
        listed = tuple(dict.fromkeys(int(d) for d in deps))
        if any(d >= task or d < 0 for d in listed):
            raise SimulationError(f"task {task} depends on {listed}: a task waits only for earlier ones")
        if not seconds >= 0:
            raise SimulationError(f"task {task} lasts {seconds!r} s; expected >= 0")
        self._kind.append(kind)
        self._seconds.append(float(seconds))
        self._fraction.append(float(fraction))
        self._call.append(call)
        self._groups.append(groups)
        self._deps.append(listed)
        if self._labels is not None:
            self._labels.append(label or ("", ""))
        return task

    def splice(self, template: Template, start: int) -> int:
        """*template*'s tasks after task *start* (its placeholder start; unlabelled builders
        only); the id of its last task."""
        if self._labels is not None:
            raise SimulationError("a template's tasks carry no labels; build a labelled graph task by task")
        base = len(self._kind) - 1
        calls = [self.call(spec) for spec in template.specs]
        self._kind += template.kind
        self._seconds += template.seconds
        self._fraction += template.fraction
        self._call += [calls[k] if k >= 0 else -1 for k in template.slots]
        self._groups += template.groups
        self._splices.append((base + 1, base, start, template))
        self._deps += [None] * len(template.kind)  # built at once in build(): numpy, not tuples
        for offset, block in template.uniform:
            self._uniform[base + offset] = block
        return base + len(template.kind)

    def build(self) -> TaskGraph:
        lens, idx = self._dependencies()
        ptr = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        calls = tuple(sorted(self._calls, key=self._calls.__getitem__))
        uniform = None
        if self._uniform:
            uniform = np.zeros(len(self._kind), dtype=np.int64)
            uniform[list(self._uniform)] = list(self._uniform.values())
        return TaskGraph(np.array(self._kind, dtype=np.int8), np.array(self._seconds),
                         np.array(self._fraction), np.array(self._call, dtype=np.int64),
                         tuple(self._groups), ptr, idx, calls,
                         None if self._labels is None else tuple(self._labels), uniform)  # fmt: skip

    def _dependencies(self) -> tuple[np.ndarray, np.ndarray]:
        """Every task's dependency count and the dependencies in task order: the tasks added
        one by one from their tuples, each splice's from its template's arrays."""
        lens: list[np.ndarray] = []
        idx: list[np.ndarray] = []
        done = 0
        for first, base, start, template in self._splices:
            self._listed(done, first, lens, idx)
            flat = template.dep_flat
            lens.append(template.dep_lens)
            idx.append(np.where(flat == 0, start, flat + base))
            done = first + len(template.kind)
        self._listed(done, len(self._deps), lens, idx)
        return np.concatenate(lens), np.concatenate(idx)

    def _listed(self, begin: int, end: int, lens: list[np.ndarray], idx: list[np.ndarray]) -> None:
        """The dependencies of tasks *begin* to *end* (added one by one) onto *lens* and *idx*."""
        listed = [deps for deps in self._deps[begin:end] if deps is not None]
        assert len(listed) == end - begin, "spliced tasks are laid out from their template"
        lens.append(np.fromiter((len(d) for d in listed), dtype=np.int64, count=end - begin))
        idx.append(np.fromiter((d for deps in listed for d in deps), dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Template:
    """Tasks recorded once and spliced after any start (:meth:`GraphBuilder.splice`): a pass's
    program is the same tasks every micro-batch, so it is built task by task once and copied
    after that. What a builder holds after its task 0 (the placeholder start): each task's
    *kind*, *seconds*, *fraction*, call (*slots*: an index into *specs*, -1 for none),
    *groups*, dependencies as offsets (0: the start, ``i``: the template's ``i``-th task,
    from 1) and the uniform tasks' (offset, block)."""

    kind: list[int]
    seconds: list[float]
    fraction: list[float]
    slots: list[int]
    specs: tuple[CallSpec, ...]
    groups: list[tuple[int, ...]]
    deps: list[tuple[int, ...]]
    uniform: tuple[tuple[int, int], ...]

    @cached_property
    def dep_lens(self) -> np.ndarray:
        """*deps* as an array: each task's count."""
        return np.array([len(d) for d in self.deps], dtype=np.int64)

    @cached_property
    def dep_flat(self) -> np.ndarray:
        """*deps* as an array: the offsets one task after another."""
        return np.array([d for row in self.deps for d in row], dtype=np.int64)

    @classmethod
    def record(cls, builder: GraphBuilder) -> Template:
        """The tasks *builder* holds after its first (which they may depend on)."""
        specs = tuple(sorted(builder._calls, key=builder._calls.__getitem__))
        return cls(builder._kind[1:], builder._seconds[1:], builder._fraction[1:], builder._call[1:], specs,
                   builder._groups[1:], [builder.deps_of(task) for task in range(1, len(builder))],
                   tuple(builder._uniform.items()))  # fmt: skip


def merge_graphs(graphs: Sequence[TaskGraph]) -> tuple[TaskGraph, list[int]]:
    """The tasks of *graphs* as one graph (each keeps its dependencies; none across), and the
    id of each one's first task in it (two jobs on one fabric)."""
    firsts = [int(x) for x in np.concatenate([[0], np.cumsum([len(g) for g in graphs])])]
    call_base = np.concatenate([[0], np.cumsum([len(g.calls) for g in graphs])]).astype(np.int64)
    ptr = [graphs[0].dep_ptr[:1]] + [g.dep_ptr[1:] + int(sum(len(h.dep_idx) for h in graphs[:i]))
                                      for i, g in enumerate(graphs)]  # fmt: skip
    labels = None if any(g.labels is None for g in graphs) else tuple(x for g in graphs for x in g.labels or ())
    merged = TaskGraph(
        np.concatenate([g.kind for g in graphs]), np.concatenate([g.seconds for g in graphs]),
        np.concatenate([g.fraction for g in graphs]),
        np.concatenate([np.where(g.call >= 0, g.call + call_base[i], -1) for i, g in enumerate(graphs)]),
        tuple(x for g in graphs for x in g.groups), np.concatenate(ptr),
        np.concatenate([g.dep_idx + firsts[i] for i, g in enumerate(graphs)]),
        tuple(c for g in graphs for c in g.calls), labels, _merged_uniform(graphs))  # fmt: skip
    return merged, firsts[:-1]


def _merged_uniform(graphs: Sequence[TaskGraph]) -> np.ndarray | None:
    if all(g.uniform is None for g in graphs):
        return None
    return np.concatenate([np.zeros(len(g), dtype=np.int64) if g.uniform is None else g.uniform for g in graphs])


@dataclass(frozen=True)
class GraphTimeline:
    """When every task of a graph started and finished (s); bytes and busy time per directed
    link of the topology (None unless asked for); *stats*: what the run did (flows simulated,
    rate solves, calls timed alone, episodes solved jointly, reductions used); *calls*: each
    collective cohort's (start, end, links crossed), when the links were asked for."""

    graph: TaskGraph
    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray | None
    link_busy_s: np.ndarray | None
    stats: dict[str, int]
    calls: tuple[tuple[float, float, np.ndarray], ...] | None = None

    @property
    def end_s(self) -> float:
        return float(self.finish_s.max()) if len(self.finish_s) else 0.0
