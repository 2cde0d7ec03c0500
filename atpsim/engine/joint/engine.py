"""The joint run with its exact shortcuts: tasks as timed events, calls timed alone wherever
nothing else is on their links, episodes of calls that meet simulated together.

The task graph (:mod:`~atpsim.engine.joint.graph`) runs as events: a task starts when its
last dependency ends; a delay ends *seconds* later; comm tasks that start at one instant on
one call form a cohort (:class:`~atpsim.engine.joint.episodes.Cohort`). Each directed link
is held by at most one open episode at a time (the calls in flight on it). A cohort whose
links no open episode holds runs alone: its groups end at ``start + alone`` (the call's own
time, so where nothing overlaps every number is the list schedule's, bit for bit). A cohort
that meets open episodes merges with them into one, which is simulated again from its first
member's start with the newcomer released at its start
(:func:`~atpsim.engine.joint.episodes.solve_episode`, with its shift symmetry, link-disjoint
parts and memo): the members' past is unchanged (the newcomer's flows start now) and their
ends still to come move to the joint answer. An episode that another call joins again
becomes *live* (:mod:`~atpsim.engine.joint.live`): one event loop advanced with the step's
clock, to which later calls are added at their start, so a chain of calls that keep meeting
is simulated once, forward, not again from its start at every arrival.

Exact because max-min rates decompose over connected components of the flow-link graph: a
call that shares no link with anything in flight has the rates it has alone, and an episode
holds every flow that met its members' flows. :func:`~atpsim.engine.joint.plain.run_plain`
runs the same graph as one network without these shortcuts; the tests hold one to the other.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

import numpy as np

from atpsim.engine.joint import clock_kernel
from atpsim.engine.joint.clock_kernel import ADVANCE, ALONE, DONE, N_EP, SUBMIT
from atpsim.engine.joint.cohorts import Cohorts
from atpsim.engine.joint.episodes import Answer, Cohort, solve_episode
from atpsim.engine.joint.graph import GraphTimeline, TaskGraph, uniform_end
from atpsim.engine.joint.live import Ends, LiveEpisode, replay, retire_finished
from atpsim.engine.joint.lone_kinds import LoneKinds
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.records import CallShape, RunStats, SolvedEpisode
from atpsim.engine.joint.tasks import CompiledClock, TaskClock
from atpsim.engine.joint.totals import nonzero_counts, sparse_totals
from atpsim.engine.solvers import event_loop
from atpsim.engine.solvers.joint_loop import CompiledLoop, compiled_if_busy, joint_loop
from atpsim.engine.solvers.joint_loop import compile_joint_loop as compile_episode_loops
from atpsim.engine.solvers.loop_choice import BUSY, COMPILED, REFERENCE, counted, loop_choice

#: Graphs of this many tasks run on the compiled clock (:mod:`~atpsim.engine.joint.
#: clock_kernel`) where numba is installed: loading it costs a process about 0.5 s, what the
#: Python clock spends on about 100,000 tasks and their calls alone (3-5 us each, measured on
#: the 512-H100 job's 308,537 tasks).
CLOCK_TASKS = 100_000


#: The holder of a link no episode holds, as a set (:meth:`_Comm._met`).
_NONE = frozenset({-1})


class _Comm:
    """Cohorts in, task ends out (module docstring)."""

    def __init__(self, graph: TaskGraph, network: JointNetwork, memo: bool, symmetry: bool,
                 split: bool = True, live: bool = True):
        self.graph, self.network, self.live = graph, network, live
        self.memo: dict[tuple, Answer] | None = {} if memo else None
        self.symmetry, self.split = symmetry, split
        self.holder = np.full(network.n_links, -1, dtype=np.int64)
        #: Every episode by number; None: one the compiled clock ran alone (:meth:`_episode`).
        self.episodes: list[SolvedEpisode | LiveEpisode | None] = []
        self.live_heap: list[tuple[float, int, int]] = []
        self._seq = 0
        self._latest: dict[int, int] = {}  # live episode -> the sequence number of its valid entry
        self._index: dict[int, int] = {}  # id(episode) -> its index (a live one grows in place)
        self.stats = RunStats()
        self._shapes: dict[tuple[int, tuple[int, ...]], CallShape] = {}
        self.cohorts = Cohorts(graph)
        # Per link, an upper bound on the end of the episode claiming it (-inf: none): a
        # cohort whose links all read <= now meets nothing (:meth:`_free`).
        self.busy_until = np.full(network.n_links, -math.inf)
        self._marked = np.zeros(network.n_links, dtype=bool)  # scratch of _met: False between calls
        self._answer_counts: dict[int, tuple[Answer, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.clock: CompiledClock | None = None
        self.table: LoneKinds | None = None
        self._finishing: list[LiveEpisode] = []  # live episodes done, whose last end may be ahead

    def attach(self, clock: CompiledClock) -> None:
        """Run lone calls of known kinds on *clock* (:class:`LoneKinds`)."""
        self.clock, self.table = clock, LoneKinds(self.graph, self.holder, self.busy_until)

    def sync(self) -> None:
        """Take in the episodes and lone calls the compiled clock numbered and ran."""
        assert self.clock is not None
        iv = self.clock.iv
        self.episodes += [None] * (int(iv[N_EP]) - len(self.episodes))
        self.stats.alone += int(iv[ALONE])
        iv[ALONE] = 0

    def _numbered(self, episode: SolvedEpisode | LiveEpisode) -> int:
        """Number *episode* next (the compiled clock numbers its own after it)."""
        index = self._index[id(episode)] = len(self.episodes)
        self.episodes.append(episode)  # kept: its id is never reused for the index
        if self.clock is not None:
            self.clock.iv[N_EP] = index + 1
        return index

    def _episode(self, index: int) -> SolvedEpisode | LiveEpisode:
        """Episode *index*, made where the compiled clock ran it (what :meth:`_alone_fast`
        makes of its cohort)."""
        episode = self.episodes[index]
        if episode is None:
            assert self.table is not None
            shape, task, start = self.table.shape_of(index)
            groups = self.graph.groups[task]
            episode = self.episodes[index] = shape.episode(Cohort(shape.plan, groups, start),
                                                           [(task, self.cohorts.positions(len(groups)))])  # fmt: skip
        return episode

    def submit(self, now: float, tasks: list[int]) -> Ends:
        """Start the comm *tasks* (all ready *now*); the (task, end) of every task whose end
        is new or moved, (task, None) for an end announced before that is no longer known."""
        out: Ends = []
        self._retire(now)
        for call, groups, owned in self.cohorts.of(tasks):
            shape = self._shape(call, groups)
            links = shape.links
            if self._free(links, now):
                out += self._alone_fast(shape, groups, owned, now)
                continue
            cohort = Cohort(shape.plan, groups, now)
            met = self._met(links, now)
            episode: SolvedEpisode | LiveEpisode
            if not met:
                episode = self._alone(shape, cohort, owned)
            elif not self.live or all(isinstance(e, SolvedEpisode) and e.answer is None for e in met):
                episode = self._merge([e for e in met if isinstance(e, SolvedEpisode)], cohort, owned, links, now)
            else:
                episode, ends = self._go_live(met, cohort, owned, links, now)
                out += ends
            if isinstance(episode, SolvedEpisode):
                for h in range(len(episode.members)):
                    out += self._ends(episode, h)
            index = self._index.get(id(episode))
            if index is None:
                index = self._numbered(episode)
            self._claim(episode.live_links(now), index, episode.end_s)
            self._schedule(index)
        return out

    def _claim(self, links: np.ndarray, index: int, end_s: float) -> None:
        """Episode *index* claims *links* (its running members'), running until *end_s*."""
        self.holder[links] = index
        self.busy_until[links] = end_s

    def _free(self, links: np.ndarray, now: float) -> bool:
        """Whether no open episode runs on *links* now (then :meth:`_met` finds none: an
        episode's end only grows where it claims its links again, so *busy_until* bounds it)."""
        return not len(links) or float(self.busy_until[links].max()) <= now

    def _alone_fast(self, shape: CallShape, groups: tuple[int, ...], owned: list[tuple[int, np.ndarray]],
                    now: float) -> Ends:
        """:meth:`_alone` and :meth:`_ends` for a cohort that meets nothing (:meth:`_free`),
        the same numbers from its shape's cached times."""
        self.stats.alone += 1
        episode = shape.episode(Cohort(shape.plan, groups, now), owned)
        index = self._numbered(episode)
        end = episode.member_end[0]
        if end > now:
            self._claim(shape.links, index, end)
        full = self.cohorts.positions(len(groups))
        out: Ends = []
        for task, where in owned:
            if not len(where):
                out.append((task, now))
            elif where is full:
                out.append((task, now + shape.last(task, self.graph.uniform, self._last)))
            else:
                out.append((task, now + self._last(task, shape.alone[where])))
        if self.table is not None and len(owned) == 1:  # a lone task's kind: the clock runs it next time
            task, where = owned[0]
            self.table.learn(task, shape, shape.last(task, self.graph.uniform, self._last) if len(where) else 0.0)
        return out

    def _go_live(self, met: list, cohort: Cohort, owned: list[tuple[int, np.ndarray]],
                 links: np.ndarray, now: float) -> tuple[LiveEpisode, Ends]:
        """The met episodes and the newcomer as one live episode (:mod:`~atpsim.engine.
        joint.live`): a live one brought to now, the others replayed up to now."""
        out: Ends = []
        live = [e for e in met if isinstance(e, LiveEpisode)]
        base = live[0] if live else None
        if base is not None:  # first: an episode replayed to now may come before it in *met*
            base.loop.run_until(now)
            out += base.harvest()
        for episode in met:
            if episode is base:
                continue
            if isinstance(episode, LiveEpisode):
                assert base is not None  # a live one met is the base or comes after it
                episode.loop.run_until(now)
                out += episode.harvest()
                base.take(self.network, episode)
                continue
            out += [(task, None) for owned_tasks in episode.tasks for task, _ in owned_tasks]
            replayed, ends = replay(self.network, episode.members, episode.tasks, episode.member_links, now,
                                    self.graph.uniform)  # fmt: skip
            out += ends
            base = self._took(base, replayed, now)
            episode.alive = False
            self.stats.replays += 1
        assert base is not None
        base.alive = True
        out += base.add(self.network, cohort, owned, links)
        self.stats.largest = max(self.stats.largest, len(base.members))
        return base, out

    def _took(self, base: LiveEpisode | None, replayed: LiveEpisode, now: float) -> LiveEpisode:
        """*base* (a new empty one at *now* where None) having taken over *replayed*. The
        first replayed episode of a compiled run becomes the base itself, its loop put in the
        state an empty one reaches by absorbing it (:meth:`~atpsim.engine.solvers.
        joint_loop.CompiledLoop.as_absorbed`): the same numbers, without copying it (the
        empty base would be compiled too: :func:`~atpsim.engine.solvers.joint_loop.joint_loop`
        made the replayed loop just now, and a replay counts no rate solve towards the switch)."""
        if base is None:
            loop = replayed.loop
            if isinstance(loop, CompiledLoop) and not loop.compacted:
                loop.as_absorbed()
                return replayed
            base = LiveEpisode(joint_loop(self.network.fabric, now), self.graph.uniform)
        base.take(self.network, replayed)
        return base

    def _schedule(self, index: int) -> None:
        """Queue episode *index*'s next event (a live one not done), after every change to it:
        only its latest entry is valid (:meth:`peek`)."""
        episode = self._episode(index)
        self._seq += 1
        if isinstance(episode, LiveEpisode) and not episode.done:
            self._latest[index] = self._seq
            heapq.heappush(self.live_heap, (episode.loop.next_time(), self._seq, index))
        else:
            if isinstance(episode, LiveEpisode) and index in self._latest:
                self._finishing.append(episode)
            self._latest.pop(index, None)

    def _retire(self, now: float) -> None:
        """Retire the live episodes done whose members all ended by *now*
        (:func:`~atpsim.engine.joint.live.retire_finished`)."""
        if self._finishing:
            self._finishing = retire_finished(self._finishing, now)

    def peek(self) -> float:
        """When the next event of a live episode happens (inf: none): the first entry that is
        its episode's latest (every change to an episode queues it again) while it is alive."""
        while self.live_heap:
            t, seq, index = self.live_heap[0]
            if self._latest.get(index) == seq and self._episode(index).alive:
                return t
            heapq.heappop(self.live_heap)
        return float("inf")

    def advance(self, t: float, limit: float) -> tuple[Ends, float]:
        """Run the live episodes whose next event is at *t*; the ends of tasks that ended,
        and the time reached. Nothing can join an episode before *limit* (s), the graph's
        next event, unless one of its own groups ends first: an episode that no other live
        episode's event precedes runs on to its first group end or to *limit*
        (:meth:`~atpsim.engine.solvers.joint_loop.CompiledLoop.run_to_group_end`, the same
        events one call each would handle), where the loop is compiled."""
        out: Ends = []
        reached = t
        while self.peek() == t:
            _, _, index = heapq.heappop(self.live_heap)
            episode = self._episode(index)
            assert isinstance(episode, LiveEpisode)
            episode.loop = compiled_if_busy(episode.loop, episode.group_ids)
            stop = min(limit, self._next_live(index)) if isinstance(episode.loop, CompiledLoop) else t
            if stop > t:
                episode.loop.run_to_group_end(stop)  # type: ignore[union-attr]  # compiled
                reached = episode.loop.now
            else:
                before = episode.loop.n_events
                episode.loop.run_until(t)
                counted(episode.loop, before)
            out += episode.harvest()
            self._schedule(index)
        return out, reached

    def _next_live(self, index: int) -> float:
        """The next event of any live episode but *index* (inf: none)."""
        others = {i for _, _, i in self.live_heap if i != index}
        times = [e.loop.next_time() for e in (self._episode(i) for i in others)
                 if isinstance(e, LiveEpisode) and e.alive and not e.done]  # fmt: skip
        return min(times, default=math.inf)

    def _met(self, links: np.ndarray, now: float) -> list[SolvedEpisode | LiveEpisode]:
        """The open episodes whose running members cross any of *links*. Each link is
        claimed by the last episode that had a running member on it, so no running member
        hides behind another episode's claim (a claim is made only where the claimer runs,
        and a second runner on the link would have merged with the first)."""
        met: list[SolvedEpisode | LiveEpisode] = []
        marked = None
        # the holders in ascending order (np.unique's, 2-3x slower on a call's few links)
        for h in sorted(set(self.holder[links].tolist()) - _NONE):
            episode = self._episode(h)
            if not (episode.alive and episode.end_s > now):
                continue
            if isinstance(episode, LiveEpisode):
                meets = episode.meets(links, now)
            else:
                if marked is None:
                    marked = self._marked
                    marked[links] = True
                meets = episode.meets(marked, now)
            if meets:
                met.append(episode)
        if marked is not None:
            marked[links] = False
        return met

    def _shape(self, call: int, groups: tuple[int, ...]) -> CallShape:
        key = (call, groups)
        shape = self._shapes.get(key)
        if shape is None:
            plan = self.network.plan(self.graph.calls[call])
            alone = plan.alone(groups)
            shape = self._shapes[key] = CallShape(plan, plan.links_of(groups), alone,
                                               float(alone.max()) if len(alone) else 0.0)  # fmt: skip
        return shape

    def _alone(self, shape: CallShape, cohort: Cohort, owned: list[tuple[int, np.ndarray]]) -> SolvedEpisode:
        """*cohort* of *shape*, which met no running member, timed alone."""
        self.stats.alone += 1
        return shape.episode(cohort, owned)

    def _merge(self, met: list[SolvedEpisode], cohort: Cohort, owned: list[tuple[int, np.ndarray]],
               links: np.ndarray, now: float) -> SolvedEpisode:
        members = [m for e in met for m in e.members] + [cohort]
        tasks = [t for e in met for t in e.tasks] + [owned]
        member_links = [lk for e in met for lk in e.member_links] + [links]
        for e in met:
            e.alive = False
        t0 = min(m.start_s for m in members)
        answer = self._solve(members, t0)
        ends = [max(t0 + float(f.max()) if len(f) else m.start_s, m.start_s)
                for m, f in zip(members, answer.finish_s, strict=True)]  # fmt: skip
        return SolvedEpisode(members, tasks, member_links, ends, answer, t0)

    def _solve(self, members: list[Cohort], t0: float) -> Answer:
        key = tuple((id(m.plan), m.groups, m.start_s - t0) for m in members)
        if self.memo is not None and key in self.memo:
            self.stats.memo_hits += 1
            return self.memo[key]
        answer = solve_episode(self.network, members, symmetry=self.symmetry, split=self.split)
        stats = self.stats
        stats.episodes += 1
        stats.symmetric += answer.path.startswith("symmetry")
        stats.flows += answer.flows
        stats.rate_solves += answer.rate_solves
        stats.largest = max(stats.largest, len(members))
        if self.memo is not None:
            self.memo[key] = answer
        return answer

    def _ends(self, episode: SolvedEpisode, h: int) -> list[tuple[int, float]]:
        """(task, end) of member *h*'s tasks: each the last of its groups."""
        member = episode.members[h]
        if episode.answer is None:
            base, rel = member.start_s, member.plan.alone(member.groups)
        else:
            base, rel = episode.t0, episode.answer.finish_s[h]
        return [(task, base + self._last(task, rel[where]) if len(where) else member.start_s)
                for task, where in episode.tasks[h]]  # fmt: skip

    def _last(self, task: int, ends: np.ndarray) -> float:
        """When the last of a task's groups ends (*ends*: theirs, relative; a uniform task's
        must be one instant: :func:`~atpsim.engine.joint.graph.uniform_end`)."""
        uniform = self.graph.uniform
        return uniform_end(task, ends, int(uniform[task])) if uniform is not None and uniform[task] else float(ends.max())

    def link_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and busy time per link over every final episode (a call alone simulated once
        per distinct call and groups, for its links' busy time), added in episode order
        (:func:`~atpsim.engine.joint.totals.sparse_totals`)."""
        return sparse_totals(self._final_counts(), self.network.n_links)

    def _final_counts(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`_counts` of every final episode in order (one the clock ran alone: its
        shape's, made once)."""
        kinds = self.table.lone_kinds(len(self.episodes)) if self.table is not None else []
        for index, episode in enumerate(self.episodes):
            if episode is None:
                counts = self.table.shapes[kinds[index]].counts  # type: ignore[union-attr]  # a table numbered it
                yield counts if counts is not None else self._counts(self._episode(index))
            elif episode.alive:
                yield self._counts(episode)

    def _counts(self, episode: SolvedEpisode | LiveEpisode) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links *episode* loaded and their bytes and busy seconds (a lone cohort's from
        its shape, once per shape: the same call alone gives the same counts)."""
        shape = episode.shape if isinstance(episode, SolvedEpisode) else None
        if shape is not None and shape.counts is not None:
            return shape.counts
        if isinstance(episode, LiveEpisode):
            loop = episode.loop
            return loop.sparse_link_counts() if isinstance(loop, CompiledLoop) else nonzero_counts(*loop.link_counts())
        answer = episode.answer or self._solve(episode.members, episode.t0)
        known = self._answer_counts.get(id(answer))  # a memo's answer serves many episodes
        if known is None or known[0] is not answer:
            known = self._answer_counts[id(answer)] = answer, nonzero_counts(answer.link_bytes, answer.link_busy_s)
        if shape is not None:
            shape.counts = known[1]
        return known[1]

    def calls(self) -> tuple[tuple[float, float, np.ndarray], ...]:
        """(start, end, links crossed) of every cohort of the run, in start order."""
        out = []
        for index, e in enumerate(self.episodes):
            if e is None:  # one the clock ran alone
                shape, _, start = self.table.shape_of(index)  # type: ignore[union-attr]  # a table numbered it
                out.append((start, shape.end(start), shape.links))
            elif e.alive:
                out += zip((m.start_s for m in e.members), e.member_end, e.member_links, strict=True)
        return tuple(sorted(out, key=lambda c: c[0]))


def run_graph(graph: TaskGraph, network: JointNetwork, *, memo: bool = True, symmetry: bool = True,
              split: bool = True, live: bool = True, links: bool = False,
              compiled: bool | None = None, clock: bool | None = None) -> GraphTimeline:
    """Run *graph* on *network* (module docstring); *memo*, *symmetry* and *split* switch
    those shortcuts of the episodes (for the tests); *links*: also count bytes and busy time
    per link; *compiled*: the episodes' event loops compiled (True), the reference's (False)
    or the reference's until the run is busy (None: :func:`~atpsim.engine.solvers.loop_choice.
    loop_choice`); *clock*: the task clock and lone calls compiled (True), Python's (False) or
    by the graph's size (None: :func:`_clock`); the same numbers every way."""
    tasks = _clock(graph, clock)
    with loop_choice(BUSY if compiled is None else COMPILED if compiled else REFERENCE, tasks.progress):
        comm = _Comm(graph, network, memo, symmetry, split, live)
        if isinstance(tasks, CompiledClock):
            comm.attach(tasks)
            _run_compiled(tasks, comm)
        else:
            _run_graph(tasks, comm)
    link_bytes, link_busy = comm.link_totals() if links else (None, None)
    return GraphTimeline(graph, np.asarray(tasks.start, dtype=np.float64), np.asarray(tasks.finish, dtype=np.float64),
                         link_bytes, link_busy, comm.stats.as_dict(), comm.calls() if links else None)  # fmt: skip


def compile_joint_loop() -> bool:
    """Compile what a large joint run loads now (numba caches the machine code on disk beside
    the package; the first large job after an install would compile it): the episodes' event
    loop (:func:`~atpsim.engine.solvers.joint_loop.compile_joint_loop`) and the task clock
    (:func:`~atpsim.engine.joint.clock_kernel.compile_clock`). Whether numba is installed."""
    return compile_episode_loops() and clock_kernel.compile_clock()


def _clock(graph: TaskGraph, clock: bool | None) -> TaskClock | CompiledClock:
    """The compiled clock where asked (*clock* True) or, by default, for a graph of
    :data:`CLOCK_TASKS` tasks or more, where numba is installed; else the Python one."""
    if clock or (clock is None and len(graph) >= CLOCK_TASKS and event_loop.use_kernel):
        functions = clock_kernel.compiled()
        if functions is not None:
            return CompiledClock(graph, functions)
    return TaskClock(graph)


def _run_compiled(tasks: CompiledClock, comm: _Comm) -> None:
    """:func:`_run_graph` on the compiled clock, which runs the task ends and the lone calls
    of known kinds itself and returns where *comm* has the next turn."""
    assert comm.table is not None, "attach the clock first"
    while True:
        t_live = comm.peek()
        status = tasks.run(t_live, comm.table)
        comm.sync()
        if status == DONE:
            return
        if status == SUBMIT:
            tasks.handle(comm.submit(tasks.now, tasks.take_pending()))
        else:
            assert status == ADVANCE
            ends, tasks.now = comm.advance(t_live, tasks.now if tasks.pending else tasks.next_end)
            tasks.handle(ends)


def _run_graph(tasks: TaskClock, comm: _Comm) -> None:
    """:func:`run_graph` with the episodes' shortcuts in *comm*: each turn, the comm tasks
    that became ready start together once nothing else happens at this instant, else the
    next live-episode event or the next task end, whichever is first."""
    while True:
        t_live = comm.peek()  # once a turn: a live episode's next event, inf for none
        if not tasks.heap and not tasks.pending and t_live == math.inf:
            break
        t_task = tasks.heap[0][0] if tasks.heap else math.inf
        if tasks.pending and min(t_task, t_live) > tasks.now:
            tasks.handle(comm.submit(tasks.now, tasks.take_pending()))
        elif t_live <= t_task:
            ends, tasks.now = comm.advance(t_live, tasks.now if tasks.pending else t_task)
            tasks.handle(ends)
        else:
            tasks.end_next()
