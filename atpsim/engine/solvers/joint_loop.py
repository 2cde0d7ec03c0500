"""The joint network's event loop over arrays, stepped by compiled functions: the reference
:class:`~atpsim.engine.solvers.flow_loop.Loop` in the :data:`~atpsim.engine.solvers.
flow_loop.JOINT` order, bit for bit (:mod:`~atpsim.engine.solvers.joint_kernel` says how),
at a small fraction of its cost an event.

:class:`CompiledLoop` has the reference loop's interface as the joint network uses it (grow
it while it runs with :meth:`~CompiledLoop.extend`, advance it with a task graph's clock with
:meth:`~CompiledLoop.run_until`, merge another into it with :meth:`~CompiledLoop.absorb`,
read its nodes' times and its links' counts); its state is arrays that grow by doubling, so
an event allocates only its own scratch, and it can take over a reference loop between two
steps (:meth:`~CompiledLoop.adopt`). The joint engine starts each run on reference loops and
goes over to compiled ones once the run is busy (:mod:`~atpsim.engine.solvers.loop_choice`): a
run whose episodes do little never loads numba.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.solvers import joint_kernel
from atpsim.engine.solvers import joint_layout as k
from atpsim.engine.solvers.flow_loop import JOINT, TIME_RTOL, Loop, NodeShape, gather, reverse_csr
from atpsim.engine.solvers.flow_network import Fabric, Nodes
from atpsim.engine.solvers.loop_choice import BUSY, compiled_functions, counted, current

#: A new compiled loop's room: nodes (twice as many incidences and dependents) and links. A
#: live episode of the 512-H100 interleaved job holds three calls: 448 nodes, 896 incidences,
#: 1,024 dependents, 256 links (1,761 of its 1,901); grown call by call from nothing, its
#: arrays were reallocated three times (about 0.25 s of the run).
INITIAL_NODES, INITIAL_LINKS = 512, 256


#: The arrays :meth:`CompiledLoop.close` frees: the nodes', links', flows' and heap's rooms.
_ROOM = ("local", "used", "w", "nf", "ni", "link_ptr", "dptr", "node_links", "didx", "inc", "incw", "lf",
         "li", "ht", "hi", "buf")


def joint_loop(fabric: Fabric, now: float = 0.0) -> Loop | CompiledLoop:
    """An event loop in the joint order on *fabric* starting at *now*, compiled or not as
    :func:`~atpsim.engine.solvers.loop_choice.loop_choice` says."""
    functions = compiled_functions()
    return CompiledLoop(fabric, now, functions) if functions is not None else Loop(fabric, JOINT, now)


def compiled_if_busy(loop: Loop | CompiledLoop,
                     groups: Callable[[], np.ndarray] | None = None) -> Loop | CompiledLoop:
    """*loop*, or a compiled loop that takes it over (:meth:`CompiledLoop.adopt`; *groups*:
    gives its nodes' groups) where the run is busy (:func:`~atpsim.engine.solvers.loop_choice.loop_choice`)."""
    if isinstance(loop, Loop):
        functions = compiled_functions()
        if functions is not None:
            return CompiledLoop.adopt(loop, functions, groups() if groups is not None else None)
    return loop


def run_to_end(loop: Loop | CompiledLoop) -> tuple[Loop | CompiledLoop, bool]:
    """Handle every event of *loop* (a reference one taken over by a compiled one once the
    run is busy); the loop that finished and whether every node did."""
    choice = current()
    while isinstance(loop, Loop) and loop.n_done < len(loop):
        before = loop.n_events
        if not loop.step():
            return loop, False
        counted(loop, before)
        if choice.mode == BUSY and choice.is_busy():
            loop = compiled_if_busy(loop)
    return loop, loop.n_done == len(loop) or loop.run()


def _grown(array: np.ndarray, need: int) -> np.ndarray:
    """*array* (its last axis) with room for at least *need* entries: itself, or a copy twice
    as large (at least *need*; the new room unset: every entry is written before it is read)."""
    size = array.shape[-1]
    if need <= size:
        return array
    out = np.empty(array.shape[:-1] + (max(need, 2 * size, 16),), dtype=array.dtype)
    out[..., :size] = array
    return out


class CompiledLoop:
    """Nodes, links in use, flows in flight and queued arrivals as arrays (the rows of
    :mod:`~atpsim.engine.solvers.joint_kernel`), stepped by *functions* (its compiled entry
    points, or :func:`~atpsim.engine.solvers.joint_kernel.plain`)."""

    def __init__(self, fabric: Fabric, now: float = 0.0, functions: dict[str, Callable[..., Any]] | None = None):
        self.fabric = fabric
        self.fn = functions if functions is not None else joint_kernel.plain()
        self.local = np.full(len(fabric.capacity_Bps), -1, dtype=np.int64)
        self.used = np.zeros(0, dtype=np.int64)
        self.s = np.zeros(15, dtype=np.int64)
        self.s[k.WEIGHTED] = fabric.weight is not None
        self.w = np.asarray(fabric.weight, dtype=np.float64) if fabric.weight is not None else np.ones((1, 1))
        self.clock = np.array([float(now)])
        # room for INITIAL_NODES nodes, twice as many incidences, dependents and flow-link
        # incidences in flight, INITIAL_LINKS links (what _room and _add_links would grow them
        # to; every entry past the counts in s is written before it is read)
        nodes, twice, i64 = INITIAL_NODES, 2 * INITIAL_NODES, np.int64
        self.nf, self.ni = np.empty((7, nodes)), np.empty((5, nodes), dtype=i64)
        self.link_ptr, self.dptr = np.zeros(nodes + 1, dtype=i64), np.zeros(nodes + 1, dtype=i64)
        self.node_links, self.didx = np.empty(twice, dtype=i64), np.empty(twice, dtype=i64)
        self.inc, self.incw = np.empty((2, twice), dtype=i64), np.empty(twice)
        self.lf, self.li = np.empty((8, INITIAL_LINKS)), np.empty((5, INITIAL_LINKS), dtype=i64)
        self.ht, self.hi = np.empty(nodes), np.empty((3, nodes), dtype=i64)
        self.buf = np.empty((3, nodes), dtype=i64)
        self._harvested = 0
        #: Whether :meth:`compact` dropped nodes (links may be left that no node crosses).
        self.compacted = False
        #: The link counts of a loop :meth:`close` freed.
        self._final: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def adopt(cls, loop: Loop, functions: dict[str, Callable[..., Any]],
              groups: np.ndarray | None = None) -> CompiledLoop:
        """A compiled loop in *loop*'s state (between two of its steps), which goes on exactly
        as *loop* would: its nodes, their times and dependency counts, the flows in flight
        with their rates and incidences in their order, the arrival queue in its storage order
        with its sequence numbers, its links' numbering and counts, the nodes done not taken
        yet. *groups*: each node's group, for :meth:`run_to_group_end`."""
        net, nodes = loop.net, loop.nodes
        assert nodes is not None and not net.changed and not loop.joining
        out = cls(net.fabric, loop.now, functions)
        out.local, out.used = net.local.copy(), net.used.copy()
        n_links = len(out.used)
        out.lf, out.li = np.zeros((8, n_links)), np.zeros((5, n_links), dtype=np.int64)
        out.lf[k.CAP, :], out.lf[k.BUSY_SINCE, :], out.lf[k.BUSY, :], out.lf[k.BYTES, :] = (
            net.capacity, net.busy_since, net.busy, net.link_bytes)
        out.li[k.CLASS, :n_links], out.li[k.ON_LINK, :n_links] = net.link_class, net.on_link
        out.s[k.N_LINKS] = n_links
        n = len(loop)
        out._append(nodes.link_ptr, nodes.link_idx, None, None,
                    (nodes.latency_s, nodes.nbytes, nodes.release_s, net.remaining[:n]), nodes.protocol,
                    loop.waiting, dependents=loop.dependents)  # fmt: skip
        out.nf[k.START, :n], out.nf[k.FINISH, :n], out.nf[k.RATE, :n] = loop.start, loop.finish, net.rate[:n]
        out._group(0, groups, None if groups is None else
                   np.bincount(groups[np.isnan(loop.finish) & (groups >= 0)], minlength=int(groups.max(initial=-1)) + 1))
        done = ~np.isnan(loop.finish)
        out.s[k.INC_DONE] = int(np.diff(nodes.link_ptr)[done].sum())
        out._room(n, int(nodes.link_ptr[n]), len(loop.dependents[1]))
        active = len(net.active)
        out.ni[k.ACTIVE, :active] = net.active
        out.ni[k.FIRST, :active] = np.searchsorted(net.owner, np.arange(active))
        out.inc[k.OWNER, :len(net.owner)], out.inc[k.LINK, :len(net.link)] = net.owner, net.link
        out.incw[:len(net.link)] = net.inc_weight if net.inc_weight is not None else 1.0
        out.s[k.N_ACTIVE], out.s[k.N_INC] = active, len(net.owner)
        for t, seq, ids in loop.arrivals:  # a heap's list pushed in order stays where it was
            out.s[k.N_SEQ] = seq - 1  # the push numbers it seq
            out.fn["heap_push"](out.ht, out.hi, out.buf, out.s, float(t), ids, 0, len(ids))
        out.s[k.N_SEQ], out.s[k.N_DONE], out.s[k.N_EVENTS] = loop.seq, loop.n_done, loop.n_events
        taken = loop.take_done()
        out.buf[k.DONE, :len(taken)] = taken
        out.s[k.DONE_TOP] = len(taken)
        return out

    # -- the reference loop's interface ------------------------------------------------------
    def __len__(self) -> int:
        return int(self.s[k.N_NODES])

    @property
    def now(self) -> float:
        return float(self.clock[k.NOW])

    @property
    def n_done(self) -> int:
        return int(self.s[k.N_DONE])

    @property
    def n_events(self) -> int:
        return int(self.s[k.N_EVENTS])

    @property
    def start(self) -> np.ndarray:
        return self.nf[k.START, :len(self)]

    @property
    def finish(self) -> np.ndarray:
        return self.nf[k.FINISH, :len(self)]

    def extend(self, nodes: Nodes, groups: np.ndarray | None = None, shape: NodeShape | None = None) -> int:
        """Add *nodes* now (:meth:`Loop.extend`); the index of the first. *groups*: each
        node's group (0, 1, ...: new groups of this loop), whose ends
        :meth:`run_to_group_end` stops at. *shape*: their :class:`~atpsim.engine.solvers.
        flow_loop.NodeShape` where the caller keeps it (nodes added again and again), else
        derived here."""
        first = len(self)
        shape = shape or NodeShape.of(nodes)
        self._append(nodes.link_ptr, nodes.link_idx, None, None,
                     (nodes.latency_s, nodes.nbytes, nodes.release_s, nodes.nbytes), nodes.protocol, shape.waiting,
                     dependents=shape.dependents, crossed=shape.links)  # fmt: skip
        self._group(first, groups, None)
        self.fn["release"](self.nf, self.ht, self.hi, self.buf, self.s, self.clock, first + shape.roots)
        return first

    def run_until(self, t: float) -> None:
        """Handle every event at or before *t*, then move the clock to *t*."""
        self._run(t, False)

    def run(self) -> bool:
        """Handle every event; whether every node finished (False: the loop stalled)."""
        return self._run(np.inf, True)

    def run_to_group_end(self, limit: float) -> None:
        """Handle the events up to *limit* (s), stopping after the first instant at which a
        group ends (its events all handled); the clock stays at the last event handled. Each
        event is handled as :meth:`run_until` at its own time would (the same steps), so a
        caller that would have stopped only where a group ends batches those calls."""
        self._run(limit, False, group_stop=True)

    def next_time(self) -> float:
        """When the next event happens (inf when nothing is left to happen)."""
        return float(self.fn["next_time"](self.nf, self.ni, self.ht, self.s, self.clock))

    def take_done(self) -> np.ndarray:
        """The nodes that finished since the last call, in the order they did."""
        top = int(self.s[k.DONE_TOP])
        done = self.buf[k.DONE, self._harvested:top].copy()
        self._harvested = top
        return done

    def compact(self) -> np.ndarray | None:
        """Drop the nodes done (every one already taken by :meth:`take_done`): a live
        episode's loop otherwise keeps each finished flow of every call that joined it (2.6 M
        nodes on the SageMaker job). Nodes keep their order, so every later number is the
        same. The old indices of the nodes kept (ascending), None where none was dropped."""
        assert self._harvested == int(self.s[k.DONE_TOP]), "take the nodes done first"
        n = len(self)
        keep = np.flatnonzero(np.isnan(self.nf[k.FINISH, :n]))
        if len(keep) == n:
            return None
        m, n_active = len(keep), int(self.s[k.N_ACTIVE])
        remap = np.full(n, -1, dtype=np.int64)
        remap[keep] = np.arange(m)
        self.nf[:, :m] = self.nf[:, keep]
        for row in (k.PROTOCOL, k.WAITING, k.GROUP):
            self.ni[row, :m] = self.ni[row, keep]
        self.ni[k.ACTIVE, :n_active] = remap[self.ni[k.ACTIVE, :n_active]]
        links = gather(self.link_ptr, self.node_links, keep)
        dependents = remap[gather(self.dptr, self.didx, keep)]
        for ptr, column, values in ((self.link_ptr, self.node_links, links), (self.dptr, self.didx, dependents)):
            lens = ptr[keep + 1] - ptr[keep]
            ptr[0] = 0
            np.cumsum(lens, out=ptr[1:m + 1])
            column[:len(values)] = values
        self._compact_arrivals(remap)
        self.s[k.N_NODES], self.s[k.N_DONE], self.s[k.INC_DONE], self.s[k.DONE_TOP] = m, 0, 0, 0
        self._harvested = 0
        self.compacted = True
        return keep

    def _compact_arrivals(self, remap: np.ndarray | None) -> None:
        """The queued arrivals' nodes renumbered by *remap* (None: kept), their segments packed."""
        heap = int(self.s[k.N_HEAP])
        starts, lens = self.hi[k.SEG_START, :heap], self.hi[k.SEG_LEN, :heap]
        ids = (np.concatenate([self.buf[k.IDS, a:a + b] for a, b in zip(starts, lens, strict=True)])
               if heap else np.zeros(0, dtype=np.int64))
        ids = remap[ids] if remap is not None else ids
        self.buf[k.IDS, :len(ids)] = ids
        self.hi[k.SEG_START, :heap] = np.concatenate([[0], np.cumsum(lens)[:-1]]) if heap else starts
        self.s[k.IDS_TOP] = len(ids)

    def absorb(self, other: CompiledLoop) -> int:
        """Take over *other* (:meth:`Loop.absorb`: at the same time, on links this one's flows
        have not met); the offset of its nodes."""
        assert other.now == self.now
        n, m, e = len(other), int(other.link_ptr[len(other)]), int(other.dptr[len(other)])
        offset = len(self)
        self.s[k.INC_DONE] += other.s[k.INC_DONE]
        self._append(other.link_ptr[:n + 1], other.used[other.node_links[:m]], None, None,
                     tuple(other.nf[row, :n] for row in (k.LAT, k.NBYTES, k.RELEASE, k.REMAINING)),
                     other.ni[k.PROTOCOL, :n], other.ni[k.WAITING, :n],
                     dependents=(other.dptr[:n + 1], other.didx[:e]))  # fmt: skip
        self._group(offset, other.ni[k.GROUP, :n], other.buf[k.GROUP_LEFT, :int(other.s[k.N_GROUPS])])
        self.nf[k.START, offset:offset + n] = other.nf[k.START, :n]
        self.nf[k.FINISH, offset:offset + n] = other.nf[k.FINISH, :n]
        link_bytes, busy = other.link_counts()
        ids = np.flatnonzero(link_bytes + busy > 0)
        self.lf[k.BYTES, self.local[ids]] += link_bytes[ids]
        self.lf[k.BUSY, self.local[ids]] += busy[ids]
        self.s[k.N_DONE] += other.n_done
        for j in range(int(other.s[k.N_HEAP])):  # in the other heap's storage order, as Loop does
            lo = int(other.hi[k.SEG_START, j])
            ids_j = other.buf[k.IDS, lo:lo + int(other.hi[k.SEG_LEN, j])] + offset
            self.fn["heap_push"](self.ht, self.hi, self.buf, self.s, float(other.ht[j]), ids_j, 0, len(ids_j))
        if other.s[k.N_ACTIVE]:
            self.fn["add_flows"](self.nf, self.ni, self.link_ptr, self.node_links, self.inc, self.incw, self.lf,
                                 self.li, self.w, self.s, self.clock,
                                 other.ni[k.ACTIVE, :int(other.s[k.N_ACTIVE])] + offset)  # fmt: skip
            self.s[k.N_EVENTS] += self.fn["update_rates"](self.nf, self.ni, self.inc, self.incw, self.lf, self.li,
                                                          self.s)  # fmt: skip
        return offset

    def as_absorbed(self) -> None:
        """Put this loop, in place, in the state a fresh loop at its time would be in after
        :meth:`absorb` of it (a live episode made of one replayed episode: the same loop,
        without copying every node into an empty one): its links numbered ascending, the
        queued arrivals numbered 1, 2, ... in their storage order, each link's busy time so
        far folded in (``busy + (now - since)``, what absorb adds), its nodes done forgotten
        as taken, its rates solved again over every flow in flight, one rate solve counted.
        ``tests/engine/solvers/test_as_absorbed.py`` holds every array to absorb's."""
        assert self._harvested == int(self.s[k.DONE_TOP]), "take the nodes done first"
        assert not self.compacted, "absorb numbers only the links that nodes cross"
        self._renumber_links()
        n_links, n_inc, n_active = int(self.s[k.N_LINKS]), int(self.s[k.N_INC]), int(self.s[k.N_ACTIVE])
        on = self.li[k.ON_LINK, :n_links] > 0  # the bytes stay; the busy time is link_counts()'
        self.lf[k.BUSY, :n_links] = self.lf[k.BUSY, :n_links] + np.where(on, self.now - self.lf[k.BUSY_SINCE, :n_links], 0.0)
        self.lf[k.BUSY_SINCE, :n_links] = np.where(on, self.now, 0.0)
        heap = int(self.s[k.N_HEAP])
        self._compact_arrivals(None)
        self.hi[k.SEQ, :heap] = np.arange(1, heap + 1)
        self.s[k.N_SEQ], self.s[k.DONE_TOP], self.s[k.N_EVENTS] = heap, 0, 0
        self._harvested = 0
        if n_active:  # every flow in flight solved again (its rate overwritten), as absorb's add does
            self.li[k.FLAG, self.inc[k.LINK, :n_inc]] = 1
            self.s[k.CHANGED] = 1
            self.s[k.N_EVENTS] = self.fn["update_rates"](self.nf, self.ni, self.inc, self.incw, self.lf, self.li,
                                                         self.s)  # fmt: skip

    def _renumber_links(self) -> None:
        """Number the links in use ascending by fabric id (as :meth:`_add_links` numbers a
        batch), every reference to them renumbered."""
        n_links = int(self.s[k.N_LINKS])
        order = np.argsort(self.used, kind="stable")
        if np.array_equal(order, np.arange(n_links)):
            return
        new_of_old = np.empty(n_links, dtype=np.int64)
        new_of_old[order] = np.arange(n_links)
        m, n_inc = int(self.link_ptr[len(self)]), int(self.s[k.N_INC])
        self.node_links[:m] = new_of_old[self.node_links[:m]]
        self.inc[k.LINK, :n_inc] = new_of_old[self.inc[k.LINK, :n_inc]]
        self.lf[:, :n_links] = self.lf[:, order]
        self.li[:, :n_links] = self.li[:, order]
        self.used = self.used[order]
        self.local[self.used] = np.arange(n_links)

    def link_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and busy time (so far) per directed link of the fabric."""
        n = len(self.fabric.capacity_Bps)
        link_bytes, busy = np.zeros(n), np.zeros(n)
        _, link_bytes[self.used], busy[self.used] = self._counts_in_use()
        return link_bytes, busy

    def sparse_link_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links with bytes or busy time so far (ascending) and those: :meth:`link_counts`'
        non-zero entries, without a pass over the fabric (a closed loop's, as it closed)."""
        if self._final is not None:
            return self._final
        used, link_bytes, busy = self._counts_in_use()
        keep = np.flatnonzero((link_bytes != 0) | (busy != 0))
        keep = keep[np.argsort(used[keep], kind="stable")]
        return used[keep], link_bytes[keep], busy[keep]

    def close(self) -> None:
        """Free the arrays of a loop that is done (every node finished and taken, nothing can
        be added), keeping its :meth:`sparse_link_counts` and its counts (:meth:`__len__`,
        :attr:`n_done`, :attr:`now`). A finished live episode of the 512-H100 job kept about
        200 KB of them (its room, the fabric's link numbering), 0.4 GB over its 1,852 live
        episodes, every page of it a fault the kernel zeroed. Anything else asked of it after
        raises AttributeError."""
        assert self.n_done == len(self) and self._harvested == int(self.s[k.DONE_TOP]), "close a loop done"
        self._final = self.sparse_link_counts()
        for name in _ROOM:
            delattr(self, name)

    def _counts_in_use(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links in use and their bytes and busy time so far (``busy + (now - since)``
        where one is on)."""
        links = int(self.s[k.N_LINKS])
        on = self.li[k.ON_LINK, :links] > 0
        return self.used, self.lf[k.BYTES, :links], self.lf[k.BUSY, :links] + np.where(
            on, self.now - self.lf[k.BUSY_SINCE, :links], 0.0)

    # -- state ---------------------------------------------------------------------------------
    def _run(self, until: float, to_end: bool, group_stop: bool = False) -> bool:
        return bool(self.fn["run"](self.nf, self.ni, self.link_ptr, self.node_links, self.dptr, self.didx,
                                   self.inc, self.incw, self.lf, self.li, self.w, self.ht, self.hi, self.buf,
                                   self.s, self.clock, float(until), to_end, TIME_RTOL, group_stop))  # fmt: skip

    def _group(self, first: int, groups: np.ndarray | None, left: np.ndarray | None) -> None:
        """The nodes from *first* on belong to *groups* (numbered from 0, -1: none; None: no
        node has one), new groups of this loop with *left* nodes each (None: counted here)."""
        end = len(self)
        if groups is None:
            self.ni[k.GROUP, first:end] = -1
            return
        base = int(self.s[k.N_GROUPS])
        if left is None:
            left = np.bincount(groups[groups >= 0]) if len(groups) else np.zeros(0, dtype=np.int64)
        self.buf = _grown(self.buf, base + len(left))
        self.buf[k.GROUP_LEFT, base:base + len(left)] = left
        self.ni[k.GROUP, first:end] = np.where(groups >= 0, groups + base, -1)
        self.s[k.N_GROUPS] = base + len(left)

    def _append(self, link_ptr: np.ndarray, links: np.ndarray, dep_ptr: np.ndarray | None,
                dep_idx: np.ndarray | None, floats: tuple[np.ndarray, ...], protocol: np.ndarray,
                waiting: np.ndarray, dependents: tuple[np.ndarray, np.ndarray] | None = None,
                crossed: np.ndarray | None = None) -> None:
        """Append nodes: their links' CSR (*link_ptr* from 0, fabric link ids *links*), their
        dependencies (CSR; or their *dependents*, already reversed), (latency, bytes, release,
        remaining) *floats*, *protocol* and *waiting* counts; start and finish unknown.
        *crossed*: the links they cross (sorted, unique), where the caller has them."""
        first, count = len(self), len(protocol)
        self._add_links(np.unique(links) if crossed is None else crossed)
        if dependents is None:
            assert dep_ptr is not None and dep_idx is not None
            dependents = reverse_csr(dep_ptr, dep_idx, count)
        m, e = int(self.link_ptr[first]), int(self.dptr[first])
        self._room(first + count, m + len(links), e + len(dependents[1]))
        end = first + count
        self.link_ptr[first + 1:end + 1] = link_ptr[1:count + 1] + m
        self.node_links[m:m + len(links)] = self.local[links]
        self.dptr[first + 1:end + 1] = dependents[0][1:count + 1] + e
        self.didx[e:e + len(dependents[1])] = dependents[1] + first
        for row, values in zip((k.LAT, k.NBYTES, k.RELEASE, k.REMAINING), floats, strict=True):
            self.nf[row, first:end] = values
        self.nf[k.START, first:end] = self.nf[k.FINISH, first:end] = np.nan
        self.nf[k.RATE, first:end] = 0.0
        self.ni[k.PROTOCOL, first:end] = protocol
        self.ni[k.WAITING, first:end] = waiting
        self.s[k.N_NODES] = end

    def number_links(self, links: np.ndarray) -> None:
        """Number *links* (fabric ids, sorted, unique) now, those not in use yet ascending:
        what the nodes added later cross, numbered at once. A replayed episode's loop numbered
        link by link as its members came had to be renumbered ascending when it became a live
        episode (:meth:`as_absorbed`); no number depends on the order (the rate solve's sums
        run in incidence order, its levels are minima)."""
        self._add_links(links)

    def _add_links(self, links: np.ndarray) -> None:
        """Number the fabric links among *links* (sorted, unique) not in use yet (ascending, as
        the reference network does) and give them their capacity and class."""
        fresh = links[self.local[links] < 0]
        if not len(fresh):
            return
        n = int(self.s[k.N_LINKS])
        self.local[fresh] = np.arange(n, n + len(fresh))
        self.used = np.concatenate([self.used, fresh])
        self.lf, self.li = _grown(self.lf, n + len(fresh)), _grown(self.li, n + len(fresh))
        self.lf[:, n:n + len(fresh)] = 0.0
        self.li[:, n:n + len(fresh)] = 0
        self.lf[k.CAP, n:n + len(fresh)] = np.asarray(self.fabric.capacity_Bps, dtype=np.float64)[fresh]
        self.li[k.CLASS, n:n + len(fresh)] = np.asarray(self.fabric.link_class)[fresh]
        self.s[k.N_LINKS] = n + len(fresh)

    def _room(self, nodes: int, incidences: int, edges: int) -> None:
        """Room for *nodes* nodes, *incidences* node-link incidences and *edges* dependents;
        the flows in flight cross at most the incidences of the nodes not done yet (a live
        episode's loop keeps millions of finished nodes: 21 M incidences on the SageMaker job)."""
        in_flight = incidences - int(self.s[k.INC_DONE])
        if (nodes <= min(self.nf.shape[1], self.ni.shape[1], self.ht.shape[0], self.hi.shape[1], self.buf.shape[1])
                and nodes < min(self.link_ptr.shape[0], self.dptr.shape[0]) and incidences <= self.node_links.shape[0]
                and edges <= self.didx.shape[0] and in_flight <= min(self.inc.shape[1], self.incw.shape[0])):
            return  # the common case once a loop has grown: every array has room (one test, not ten)
        self.nf, self.ni = _grown(self.nf, nodes), _grown(self.ni, nodes)
        self.ht, self.hi, self.buf = _grown(self.ht, nodes), _grown(self.hi, nodes), _grown(self.buf, nodes)
        self.link_ptr, self.dptr = _grown(self.link_ptr, nodes + 1), _grown(self.dptr, nodes + 1)
        self.node_links, self.didx = _grown(self.node_links, incidences), _grown(self.didx, edges)
        self.inc, self.incw = _grown(self.inc, in_flight), _grown(self.incw, in_flight)


def compile_joint_loop() -> bool:
    """Compile the joint loop's functions now (numba caches the machine code on disk beside
    the package, so every later process loads it, 0.5-0.8 s, instead of compiling it, about
    15 s once after an install): every entry point run once on a few flows, with and without
    protocol weights. Whether numba is installed (False: nothing to compile)."""
    functions = joint_kernel.compiled()
    if functions is None:  # pragma: no cover - numba is a dependency
        return False
    for weight in (None, np.array([[1.0, 2.0]])):
        fabric = Fabric(np.array([1e9, 2e9]), np.array([0, 1]), weight)
        nodes = Nodes(np.array([0, 1, 3, 3]), np.array([0, 0, 1]), np.array([1e-6, 0.0, 2e-6]),
                      np.array([1e6, 2e6, 0.0]), np.zeros(3, dtype=np.int64), np.zeros(3),
                      np.array([0, 0, 0, 1]), np.array([0]))  # fmt: skip
        loop, other = CompiledLoop(fabric, 0.0, functions), CompiledLoop(fabric, 0.0, functions)
        loop.extend(nodes, np.array([0, 0, 1]))
        other.extend(nodes)
        loop.run_to_group_end(np.inf)
        other.run_until(loop.now)
        loop.take_done()
        loop.absorb(other)
        loop.next_time()
        loop.run()
        loop.link_counts()
    return True
