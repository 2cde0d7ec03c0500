"""Episodes: calls whose flows met on a link while in flight, simulated together.

A *cohort* is the groups of one call that start at one instant. Max-min rates decompose over
the connected components of the flow-link graph, so a cohort whose links carry nothing else
from its start to its end runs exactly as it does alone: its time is the call's own
(:meth:`~atpsim.engine.joint.calls.CallPlan.alone`, the collective engine with all its exact
reductions). Cohorts that do meet form an *episode*, simulated as one network from its first
member's start, each member's flows released at its start plus its fixed latency
(:func:`solve_episode`). Inside an episode two more exact reductions apply:

- *shift symmetry*: where a rank shift maps every member's transfers onto themselves and
  their routes onto routes of equal links (all data-parallel replicas in step, for one),
  the episode is the same problem on each orbit, and one flow per orbit is simulated
  (:func:`atpsim.engine.reductions.symmetry.find_symmetry` on the members' steps together,
  which also asks each member to map onto itself, so release times are invariant; the links
  must keep their protocol class too);
- *link-disjoint parts*: the episode's flows split into components that share no link and
  wait for nothing across, each distinct one simulated once
  (:mod:`~atpsim.engine.joint.components`: the eight NIC rails of a stage's gradient
  buckets and sends, where no shift maps the episode onto itself);
- *memo*: an episode whose members, groups and start offsets repeat exactly (the steady
  state of a pipeline repeats its overlaps) is solved once; its answer is in relative time.

Each is tested against the plain run (:mod:`atpsim.engine.joint.plain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Steps, rendezvous_dependencies
from atpsim.engine.joint.calls import PROTOCOL_ROWS, CallPlan
from atpsim.engine.joint.components import run_by_components
from atpsim.engine.joint.flows import FlowSet, run_flow_set
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.problem import Problem
from atpsim.engine.reductions.symmetry import Symmetry, find_symmetry
from atpsim.engine.routes import route_pairs


@dataclass(frozen=True, eq=False, slots=True)
class Cohort:
    """Groups *groups* (indices into the call's groups, sorted) of call *plan*, started at
    *start_s*."""

    plan: CallPlan
    groups: tuple[int, ...]
    start_s: float


@dataclass(frozen=True)
class Answer:
    """An episode's outcome in time relative to its first member's start: *finish_s[i][j]*,
    member ``i``'s group ``j``; per directed link, data *link_bytes* and *link_busy_s*;
    *flows* in the episode, *rate_solves*, the *path* (``joint``, ``symmetry+parts+joint``,
    ...) and *parts*: (link-disjoint parts, distinct parts simulated)."""

    finish_s: tuple[np.ndarray, ...]
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    flows: int
    rate_solves: int
    path: str
    parts: tuple[int, int] = (1, 1)


def solve_episode(network: JointNetwork, members: list[Cohort], *, symmetry: bool = True,
                  split: bool = True) -> Answer:
    """Simulate *members* together from the first one's start (module docstring); *symmetry*
    and *split* (link-disjoint parts apart, identical ones once) switch those shortcuts."""
    t0 = min(m.start_s for m in members)
    moving = [m for m in members if m.plan.moves_bytes]
    key = (tuple((id(m.plan), m.groups) for m in moving), symmetry)  # the network keeps its plans
    if key not in network.episode_parts:
        network.episode_parts[key] = _parts(network, moving, symmetry)
    schedules, problem, found, small = network.episode_parts[key]
    flows, spans = _flows(small, moving, schedules, t0)
    run, parts, distinct = run_by_components(small.routes, network.fabric, flows) if split \
        else (run_flow_set(small.routes, network.fabric, flows), 1, 1)
    done = _done(small, flows, spans, run.finish_s, len(moving))
    finish = [_member_finish(m, small, done[moving.index(m)] if m in moving else None, t0)
              for m in members]
    link_bytes, link_busy = _links(found, problem, run.link_bytes, run.link_busy_s)
    path = ("symmetry+" if found is not None else "") + ("parts+" if parts > 1 else "") + "joint"
    return Answer(tuple(finish), link_bytes, link_busy, int(np.count_nonzero(flows.pair >= 0)),
                  run.n_events, path, (parts, distinct))  # fmt: skip


def _parts(network: JointNetwork, moving: list[Cohort], symmetry: bool
           ) -> tuple[list, Problem, Symmetry | None, Problem]:
    """What :func:`solve_episode` derives from its moving members' calls and groups alone,
    whatever their starts (the same members meet again at other offsets: the 512-H100 job
    solves 368 episodes of far fewer kinds): their schedules, the union of their transfers
    as a problem, the rank shift it is invariant under (*symmetry*: looked for) and the
    quotient problem it leaves."""
    schedules = [m.plan.schedule(m.groups) for m in moving]
    union = Steps(tuple(t for s in schedules for t in s.steps.templates),
                  tuple(k + offset for s, offset in zip(schedules, _offsets(schedules), strict=True)
                        for k in s.steps.order))  # fmt: skip
    n = network.topology.n_gpus
    keys = np.unique(np.concatenate([t.src * n + t.dst for t, _ in union.in_use()])) \
        if len(union) else np.zeros(0, np.int64)
    problem = Problem.of(union, route_pairs(network.topology, keys), network.topology.links)
    found = _symmetry(problem, network) if symmetry and len(union) else None
    return schedules, problem, found, found.shrink(problem) if found is not None else problem


def _member_finish(member: Cohort, small: Problem, done: np.ndarray | None, t0: float) -> np.ndarray:
    """Each of *member*'s groups' finish, relative to *t0*: the last of its ranks' flows, or
    its alone time where it moves nothing (one rank, no bytes)."""
    plan = member.plan
    if done is None:
        return (member.start_s - t0) + plan.alone(member.groups)
    out = np.empty(len(member.groups))
    single = []
    for j, g in enumerate(member.groups):
        ranks = np.asarray(plan.spec.groups[g])
        if len(ranks) > 1:
            out[j] = done[small.rank_of(ranks)].max()
        else:
            single.append(j)
    if single:
        out[single] = (member.start_s - t0) + plan.alone(member.groups)[single]
    return out


def _offsets(schedules: list) -> list[int]:
    counts = [len(s.steps.templates) for s in schedules]
    return [int(c) for c in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


def _symmetry(problem: Problem, network: JointNetwork) -> Symmetry | None:
    """A rank shift under which the union is invariant and the links keep their class."""
    found = find_symmetry(problem)
    if found is None:
        return None
    classes = network.fabric.link_class
    used = found.used_links
    return found if np.array_equal(classes[found.link_rep[used]], classes[used]) else None


def _flows(small: Problem, moving: list[Cohort], schedules: list, t0: float
           ) -> tuple[FlowSet, list[tuple[int, int]]]:
    """The (quotient) problem's transfers as one flow set, member after member, each released
    at its member's start plus its fixed latency, with its call's rendezvous dependencies."""
    columns: list[list[np.ndarray]] = [[], [], [], [], [], []]
    spans, first, position = [], 0, 0
    for member, schedule in zip(moving, schedules, strict=True):
        count = len(schedule.steps)
        src, dst, nbytes, lane, step = _flat(small.steps[position:position + count])
        position += count
        ptr, idx = rendezvous_dependencies(small.rank_of(src), small.rank_of(dst), step, lane)
        released = (member.start_s - t0) + member.plan.fixed_s
        row = PROTOCOL_ROWS.index(member.plan.protocol)
        for column, value in zip(columns, (small.routes.index(src, dst), nbytes,
                                           np.full(len(src), row), np.full(len(src), released),
                                           np.diff(ptr), idx + first), strict=True):  # fmt: skip
            column.append(value)
        spans.append((first, first + len(src)))
        first += len(src)
    pair, size, protocol, release, lens, idx = (
        np.concatenate(c) if c else np.zeros(0) for c in columns)
    ptr = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens.astype(np.int64), out=ptr[1:])
    flows = FlowSet(pair.astype(np.int64), size.astype(np.float64), protocol.astype(np.int64),
                    release.astype(np.float64), (ptr, idx.astype(np.int64)))  # fmt: skip
    return flows, spans


def _flat(steps: Steps) -> tuple[np.ndarray, ...]:
    """(src, dst, bytes, lane, step index) of every transfer of *steps*, step by step."""
    parts = [(s.src, s.dst, s.nbytes, s.lanes, np.full(len(s.src), k, dtype=np.int64))
             for k, s in enumerate(steps)]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), empty, empty
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))


def _done(small: Problem, flows: FlowSet, spans: list[tuple[int, int]], finish_s: np.ndarray,
          n_members: int) -> list[np.ndarray]:
    """For each moving member: the finish of the last of its flows each rank id takes part in."""
    src, dst = small.routes.src[flows.pair], small.routes.dst[flows.pair]
    ids_src, ids_dst = small.rank_of(src), small.rank_of(dst)
    out = []
    for lo, hi in spans:
        done = np.zeros(small.n_ids)
        np.maximum.at(done, ids_src[lo:hi], finish_s[lo:hi])
        np.maximum.at(done, ids_dst[lo:hi], finish_s[lo:hi])
        out.append(done)
    return out


def _links(found: Symmetry | None, problem: Problem, link_bytes: np.ndarray,
           link_busy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-link bytes and busy time of the whole episode: a quotient's spread over the orbits."""
    if found is None:
        return link_bytes, link_busy
    used = found.used_links
    full_bytes, full_busy = np.zeros(len(link_bytes)), np.zeros(len(link_busy))
    full_bytes[used] = link_bytes[found.link_rep[used]]
    full_busy[used] = link_busy[found.link_rep[used]]
    return full_bytes, full_busy

