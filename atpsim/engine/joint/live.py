"""Live episodes: calls that keep meeting, simulated once, forward, with the step.

An episode solved ahead (:func:`~atpsim.engine.joint.episodes.solve_episode`) is simulated
again from its first member's start whenever another call joins it. Where calls keep joining
(the cooldown's pipeline sends under a stage's long gradient all-reduce, TP collectives of
many stages on an oversubscribed spine) that is quadratic. A live episode instead holds one
event loop (:func:`~atpsim.engine.solvers.joint_loop.joint_loop`) that the engine advances with the
step's clock: a call that joins is added to it at its start, a call that was running alone
until then is replayed alone up to now (its links met nothing, so that is its history) and
taken in with its state, and the members' groups end when their last flow does. Every flow
event is simulated once; the answer is the plain run's (the tests hold it to that).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from atpsim.engine.joint.calls import PROTOCOL_ROWS, CallPlan
from atpsim.engine.joint.episodes import Cohort
from atpsim.engine.joint.flows import FlowSet, nodes_of
from atpsim.engine.joint.graph import uniform_end
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.routes import route_pairs
from atpsim.engine.solvers.flow_loop import Loop, NodeShape
from atpsim.engine.solvers.flow_network import Nodes
from atpsim.engine.solvers.growing import Column
from atpsim.engine.solvers.joint_loop import CompiledLoop, joint_loop

#: A compiled loop drops its nodes done once they are this many and most of its nodes.
COMPACT_NODES = 65_536

#: (task, end) of a task that ended; (task, None): forget the end announced before.
Ends = list[tuple[int, float | None]]


def member_nodes(network: JointNetwork, cohort: Cohort) -> tuple[Nodes, np.ndarray, NodeShape]:
    """The nodes of *cohort*'s flows (released at its start plus its fixed latency, with its
    call's rendezvous dependencies), the position of each one's group in the cohort and the
    nodes' shape (read-only: a call's groups give the same nodes whenever they start, so they
    are built once and only the release times are new)."""
    nodes, group, shape = _parts(network, cohort)
    release = np.full(len(nodes), cohort.start_s + cohort.plan.fixed_s)
    return Nodes(nodes.link_ptr, nodes.link_idx, nodes.latency_s, nodes.nbytes, nodes.protocol, release,
                 nodes.dep_ptr, nodes.dep_idx), group, shape  # dataclasses.replace costs 4x this


def _parts(network: JointNetwork, cohort: Cohort) -> tuple[Nodes, np.ndarray, NodeShape]:
    """:func:`_member_parts` of *cohort*'s call and groups, built once per run."""
    key = (id(cohort.plan), cohort.groups)  # the network keeps its plans for the run: ids stay theirs
    if key not in network.member_parts:
        network.member_parts[key] = _member_parts(network, cohort.plan, cohort.groups)
    return network.member_parts[key]


def _member_parts(network: JointNetwork, plan: CallPlan, groups: tuple[int, ...]
                  ) -> tuple[Nodes, np.ndarray, NodeShape]:
    """What :func:`member_nodes` builds from a call's groups alone, whenever they start: the
    nodes of its flows over their routes (released at 0), each one's group position and their
    :class:`~atpsim.engine.solvers.flow_loop.NodeShape`."""
    schedule = plan.schedule(groups)
    n = network.topology.n_gpus
    routes = route_pairs(network.topology, np.unique(schedule.src * n + schedule.dst))
    pair = routes.index(schedule.src, schedule.dst)
    flows = FlowSet(pair, np.asarray(schedule.transfer_bytes, dtype=np.float64),
                    np.full(len(pair), PROTOCOL_ROWS.index(plan.protocol)), np.zeros(len(pair)),
                    schedule.dependencies())  # fmt: skip
    nodes = nodes_of(routes, flows)
    group = np.concatenate([s.group for s in schedule.steps]) if len(schedule.steps) else np.zeros(0, np.int64)
    group = group.astype(np.int64)
    for array in (*(getattr(nodes, f.name) for f in fields(nodes)), group):
        array.flags.writeable = False
    return nodes, group, NodeShape.of(nodes)


@dataclass(eq=False)
class LiveEpisode:
    """Members (cohorts) in one loop; per member its tasks, links, end (inf while it runs),
    and per group how many flows are left and when it ended; *uniform*: the graph's uniform
    tasks (:func:`~atpsim.engine.joint.graph.uniform_end`), None where it has none."""

    loop: Loop | CompiledLoop
    uniform: np.ndarray | None = None
    members: list[Cohort] = field(default_factory=list)
    tasks: list[list[tuple[int, np.ndarray]]] = field(default_factory=list)
    member_links: list[np.ndarray] = field(default_factory=list)
    member_end: list[float] = field(default_factory=list)
    group_left: list[np.ndarray] = field(default_factory=list)
    group_end: list[np.ndarray] = field(default_factory=list)
    owners: tuple[Column, Column] = field(default_factory=lambda: (Column(np.zeros(0), np.int64),
                                                                  Column(np.zeros(0), np.int64)))
    alive: bool = True
    #: Whether :meth:`retire` freed it.
    retired: bool = False
    #: Members whose end the last :meth:`live_links` did not find past (the engine's clock only
    #: grows, and a member's end, once known, stays): a giant episode's thousand finished
    #: buckets are not looked at again. Per link, how many of them cross it, and those links.
    _open: list[int] = field(default_factory=list)
    _crossing: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _open_links: np.ndarray | None = None
    #: Members still running (end inf), and the latest end of the others.
    _running: int = 0
    _ended_max: float = -np.inf

    @property
    def node_member(self) -> np.ndarray:
        """The member each of the loop's nodes belongs to."""
        return self.owners[0].view

    @property
    def node_group(self) -> np.ndarray:
        """The position of each node's group in its member's cohort."""
        return self.owners[1].view

    def group_ids(self) -> np.ndarray:
        """Each loop node's group numbered across the members (member after member)."""
        offsets = np.cumsum([0] + [len(left) for left in self.group_left])
        return offsets[self.node_member] + self.node_group

    @property
    def end_s(self) -> float:
        """When the last member ends (inf while one runs): ``max(member_end)``."""
        return np.inf if self._running else self._ended_max

    @property
    def done(self) -> bool:
        return self.loop.n_done == len(self.loop)

    def live_links(self, now: float) -> np.ndarray:
        """The links of the members still running *now* (never earlier than the last call's),
        sorted."""
        self._prune(now)
        if self._open_links is None:
            self._open_links = np.flatnonzero(self._crossing > 0)
        return self._open_links

    def meets(self, links: np.ndarray, now: float) -> bool:
        """Whether a member still running *now* crosses any of *links*."""
        self._prune(now)
        inside = links[links < len(self._crossing)]
        return bool(np.any(self._crossing[inside] > 0))

    def _prune(self, now: float) -> None:
        """Forget the open members that ended by *now*."""
        kept = []
        for h in self._open:
            if self.member_end[h] > now:
                kept.append(h)
            else:
                self._crossing[self.member_links[h]] -= 1
                self._open_links = None
        self._open = kept

    def _open_member(self, h: int) -> None:
        """Member *h* runs: count the links it crosses (each once: a call's links are unique)."""
        links = self.member_links[h]
        top = int(links.max()) if len(links) else -1
        if top >= len(self._crossing):  # to the last link crossed: a finished episode keeps it
            grown = np.zeros(top + 1, dtype=np.int64)
            grown[:len(self._crossing)] = self._crossing
            self._crossing = grown
        self._crossing[links] += 1
        self._open.append(h)
        self._open_links = None

    def _set_end(self, h: int, end: float) -> None:
        """Member *h* ends at *end* (inf: still running; set once, or from inf once)."""
        if h == len(self.member_end):
            self.member_end.append(end)
            self._open_member(h)
        else:
            self._running -= 1
            self.member_end[h] = end
        if end == np.inf:
            self._running += 1
        else:
            self._ended_max = max(self._ended_max, end)

    def add(self, network: JointNetwork, cohort: Cohort, owned: list[tuple[int, np.ndarray]],
            links: np.ndarray) -> Ends:
        """Add *cohort* (starting at the loop's time or later) and its tasks."""
        h = len(self.members)
        self.members.append(cohort)
        self.tasks.append(owned)
        self.member_links.append(links)
        alone = cohort.plan.alone(cohort.groups)
        ends = cohort.start_s + np.asarray(alone, dtype=np.float64)
        left = np.zeros(len(cohort.groups), dtype=np.int64)
        if cohort.plan.moves_bytes:
            nodes, group, shape = member_nodes(network, cohort)
            self.loop.extend(nodes, group, shape)
            self.owners[0].extend(np.full(len(nodes), h, dtype=np.int64))
            self.owners[1].extend(group)
            left = np.bincount(group, minlength=len(cohort.groups)).astype(np.int64)
        ends[left > 0] = np.nan
        self.group_left.append(left)
        self.group_end.append(ends)
        self._set_end(h, float("inf") if left.any() else float(np.max(ends, initial=cohort.start_s)))
        return self._finished(h)

    def harvest(self) -> Ends:
        """The tasks whose last group ended in the loop's latest events."""
        done = self.loop.take_done()
        if not len(done):
            return []
        owner, group = self.node_member[done], self.node_group[done]
        first = int(owner[0])
        if (owner == first).all():  # the common case: one member's nodes
            out = self._member_done(first, done, group)
        else:
            out = []
            for h in np.unique(owner).tolist():
                mine = owner == h
                out += self._member_done(h, done[mine], group[mine])
        if isinstance(self.loop, CompiledLoop) and self.loop.n_done > max(COMPACT_NODES, len(self.loop) // 2):
            self._compact()
        return out

    def _member_done(self, h: int, done: np.ndarray, group: np.ndarray) -> Ends:
        """Member *h*'s nodes *done* (of its groups *group*, in the order they finished)
        counted off its groups; the tasks that ended with them. A group's end is its last
        node's finish."""
        left = self.group_left[h]
        left -= np.bincount(group, minlength=len(left))
        now_done = left[group] == 0
        if not now_done.any():  # no group of its ended: no task of its can have
            return []
        self.group_end[h][group[now_done]] = self.loop.finish[done[now_done]]
        if not left.any():
            self._set_end(h, float(np.max(self.group_end[h])))
        return self._finished(h)

    def retire(self) -> None:
        """Free what a finished episode (its loop done, every member ended) no longer needs:
        nothing can meet it or join it again, and only its members, their ends and links and
        its link counts are read after (:meth:`~atpsim.engine.solvers.joint_loop.CompiledLoop.
        close`)."""
        assert self.done and not self._running and not self.retired, "retire a finished episode once"
        self.retired = True
        if isinstance(self.loop, CompiledLoop):
            self.loop.close()
        self.owners = (Column(np.zeros(0), np.int64), Column(np.zeros(0), np.int64))
        self._open, self._crossing, self._open_links = [], np.zeros(0, dtype=np.int64), None

    def _compact(self) -> None:
        """Drop the loop's nodes done (:meth:`~atpsim.engine.solvers.joint_loop.CompiledLoop.
        compact`) and their owners."""
        assert isinstance(self.loop, CompiledLoop)
        keep = self.loop.compact()
        if keep is not None:
            self.owners = (Column(self.node_member[keep], np.int64), Column(self.node_group[keep], np.int64))

    def _finished(self, h: int) -> Ends:
        """Member *h*'s tasks whose groups have all ended (each announced once)."""
        ends, left = self.group_end[h], self.group_left[h]
        start = self.members[h].start_s
        out: Ends = []
        pending = []
        for task, where in self.tasks[h]:
            if len(where) and left[where].any():
                pending.append((task, where))
            elif not len(where):
                out.append((task, start))
            elif self.uniform is not None and self.uniform[task]:
                out.append((task, uniform_end(task, ends[where], int(self.uniform[task]))))
            else:
                out.append((task, float(ends[where].max())))
        self.tasks[h] = pending
        return out

    def take(self, network: JointNetwork, other: LiveEpisode) -> None:
        """Take over *other* (at the same time; links apart until now)."""
        offset = len(self.members)
        if isinstance(self.loop, CompiledLoop) and isinstance(other.loop, Loop):  # the run got busy between
            other.loop = CompiledLoop.adopt(other.loop, self.loop.fn, other.group_ids())
        elif isinstance(self.loop, Loop) and isinstance(other.loop, CompiledLoop):
            self.loop = CompiledLoop.adopt(self.loop, other.loop.fn, self.group_ids())
        self.loop.absorb(other.loop)  # type: ignore[arg-type]  # both of one kind now
        self.members += other.members
        self.tasks += other.tasks
        self.member_links += other.member_links
        for end in other.member_end:
            self._set_end(len(self.member_end), end)
        self.group_left += other.group_left
        self.group_end += other.group_end
        self.owners[0].extend(other.node_member + offset)
        self.owners[1].extend(other.node_group)
        other.alive = False


def retire_finished(episodes: list[LiveEpisode], now: float) -> list[LiveEpisode]:
    """Retire (:meth:`LiveEpisode.retire`) those of *episodes* (alive, loops done at some
    point) whose members all ended by *now*: none can be met again (a newcomer meets only
    members running after now, and the engine's now only grows). Those still to retire: an
    end still ahead, or joined again since their loop was done."""
    ahead = []
    for episode in episodes:
        if not episode.alive or episode.retired:
            continue
        if episode.done and episode.end_s <= now:
            episode.retire()
        else:
            ahead.append(episode)
    return ahead


def replay(network: JointNetwork, members: list[Cohort], tasks: list[list[tuple[int, np.ndarray]]],
           member_links: list[np.ndarray], now: float, uniform: np.ndarray | None = None
           ) -> tuple[LiveEpisode, Ends]:
    """A live episode of *members* simulated together from the first one's start up to
    *now* (their history), and the ends of tasks that ended by then."""
    t0 = min(m.start_s for m in members)
    episode = LiveEpisode(joint_loop(network.fabric, t0), uniform)
    crossed = [_parts(network, m)[2].links for m in members if m.plan.moves_bytes]
    if isinstance(episode.loop, CompiledLoop) and crossed:  # numbered ascending, as absorbing it would
        episode.loop.number_links(np.unique(np.concatenate(crossed)))
    out: Ends = []
    for member, owned, links in zip(members, tasks, member_links, strict=True):
        out += episode.add(network, member, owned, links)
    episode.loop.run_until(now)
    return episode, out + episode.harvest()
