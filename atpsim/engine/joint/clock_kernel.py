"""The joint run's task clock and its calls alone as compiled functions over arrays: the
:class:`~atpsim.engine.joint.tasks.TaskClock` and the engine's lone-cohort path
(:meth:`~atpsim.engine.joint.engine._Comm._alone_fast`) with the same operations in the same
order, so the same numbers to the bit.

A large job graph is mostly tasks that only start their dependents (compute, delays, markers)
and calls that meet nothing: the 512-H100 interleaved job has 308,537 tasks and 72,392 calls
alone against 1,901 episodes that go live. In Python each costs a few microseconds of heap
and bookkeeping (about 30 % of the run). Here they run in one compiled loop that returns to
the engine only where Python has work: a cohort that is not a lone call of a known kind, or
not free, or a live episode's event first.

What the loop does is the Python loop's step for step (:func:`run`): the same decision each
turn (start the waiting comm tasks once nothing else happens at this instant, else the live
episode's event, else the next end), the same heap (:mod:`heapq`'s order on ``(time,
sequence)`` keys, stale entries skipped by version), the same arithmetic for an end
(``t + fraction * ((t + seconds) - t)``, ``max(t, now)``), and for a lone call what
``_alone_fast`` does: the call is free where no link of its shape is busy past now, its
episode (numbered where the engine would number it) claims its links until ``now + alone``,
and its task ends ``now + last``. A kind of lone call (call, groups, block) is known once the
engine has timed one alone (:meth:`~atpsim.engine.joint.lone_kinds.LoneKinds.learn`).
``tests/engine/joint/test_compiled_clock.py`` holds the two to equality on job graphs.

The functions are plain Python (run as such without numba, slowly) and compiled by
:func:`compiled` (numba, cached on disk).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.joint.graph import COMM, DELAY
from atpsim.engine.solvers.numba_target import load_cpu_target

#: The task kinds these functions are written for (graph's DELAY, MARKER, COMM): numba caches
#: their machine code by this file, not by the constants it imports, so a test holds these to
#: the graph's and a change there must change this file (numba then compiles it again).
KINDS = (0, 1, 2)

#: Rows of the clock's integer state: entries on the heap, the last sequence number, comm
#: tasks waiting, tasks ended, episodes numbered, lone calls run here.
HEAP_N, SEQ, PEND_N, ENDED, N_EP, ALONE = range(6)
#: Why :func:`run` returned: nothing is left; the waiting comm tasks need the engine; the live
#: episode's event comes first; an array needs room.
DONE, SUBMIT, ADVANCE, GROW = range(4)


def push(ht, hs, hk, hv, iv, t, task, version):  # pragma: no cover - compiled
    """Queue *task*'s end at *t* (for its *version*), numbered next: heapq's sift-down."""
    iv[SEQ] += 1
    seq = iv[SEQ]
    i = iv[HEAP_N]
    iv[HEAP_N] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if ht[parent] < t or (ht[parent] == t and hs[parent] < seq):
            break
        ht[i], hs[i], hk[i], hv[i] = ht[parent], hs[parent], hk[parent], hv[parent]
        i = parent
    ht[i], hs[i], hk[i], hv[i] = t, seq, task, version


def pop(ht, hs, hk, hv, iv):  # pragma: no cover - compiled
    """The first end queued (time, task, version), taken off the heap."""
    t0, k0, v0 = ht[0], hk[0], hv[0]
    n = iv[HEAP_N] - 1
    iv[HEAP_N] = n
    if n > 0:
        t, s, k, v = ht[n], hs[n], hk[n], hv[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
                c += 1
            if ht[c] < t or (ht[c] == t and hs[c] < s):
                ht[i], hs[i], hk[i], hv[i] = ht[c], hs[c], hk[c], hv[c]
                i = c
            else:
                break
        ht[i], hs[i], hk[i], hv[i] = t, s, k, v
    return t0, k0, v0


def ready(task, t, kind, seconds, fraction, start, version, pending, ht, hs, hk, hv, iv):  # pragma: no cover
    """*task*'s dependencies all ended at *t*: it starts (TaskClock.ready)."""
    start[task] = t
    if kind[task] == DELAY:
        push(ht, hs, hk, hv, iv, t + seconds[task], task, version[task])
    elif kind[task] == COMM:
        pending[iv[PEND_N]] = task
        iv[PEND_N] += 1
    else:
        push(ht, hs, hk, hv, iv, t + fraction[task] * ((t + seconds[task]) - t), task, version[task])


def start_roots(waiting, kind, seconds, fraction, start, version, pending, ht, hs, hk, hv, iv):  # pragma: no cover
    """Every task with no dependency starts at 0, in task order (TaskClock.__init__)."""
    for task in range(len(waiting)):
        if waiting[task] == 0:
            ready(task, 0.0, kind, seconds, fraction, start, version, pending, ht, hs, hk, hv, iv)


def handle(tasks, times, known, finish, version, ht, hs, hk, hv, iv, fv):  # pragma: no cover
    """New or moved ends of comm tasks not finished yet, *known* False where the end is no
    longer known (TaskClock.handle)."""
    now = fv[0]
    for j in range(len(tasks)):
        task = tasks[j]
        if math.isnan(finish[task]):
            version[task] += 1
            if known[j]:
                t = times[j]
                push(ht, hs, hk, hv, iv, now if now > t else t, task, version[task])


def lone_calls(key_of, call_of, key_shape, key_rel, sh_ptr, sh_links, sh_max, holder, busy_until, ep_task, ep_start,
               mark, finish, version, pending, ht, hs, hk, hv, iv, fv):  # pragma: no cover
    """Start the waiting comm tasks that are lone calls of a known kind and free, in order,
    up to the first that is not (left waiting, with those after it, for the engine)."""
    p, now = iv[PEND_N], fv[0]
    for j in range(p):
        mark[call_of[pending[j]]] += 1
    done = 0
    while done < p:
        task = pending[done]
        key = key_of[task]
        if mark[call_of[task]] != 1 or key < 0 or key_shape[key] < 0:
            break
        shape = key_shape[key]
        lo, hi = sh_ptr[shape], sh_ptr[shape + 1]
        free = True
        for q in range(lo, hi):
            if busy_until[sh_links[q]] > now:
                free = False
                break
        if not free:
            break
        index = iv[N_EP]
        iv[N_EP] = index + 1
        ep_task[index], ep_start[index] = task, now
        end = now + sh_max[shape]
        if end > now:
            for q in range(lo, hi):
                holder[sh_links[q]] = index
                busy_until[sh_links[q]] = end
        iv[ALONE] += 1
        if math.isnan(finish[task]):
            version[task] += 1
            t = now + key_rel[key]
            push(ht, hs, hk, hv, iv, now if now > t else t, task, version[task])
        done += 1
    for j in range(p):
        mark[call_of[pending[j]]] -= 1
    for j in range(done, p):
        pending[j - done] = pending[j]
    iv[PEND_N] = p - done
    return done


def run(t_live, kind, seconds, fraction, rptr, ridx, waiting, start, finish, version, pending,
        ht, hs, hk, hv, iv, fv, key_of, call_of, key_shape, key_rel, sh_ptr, sh_links, sh_max, holder,
        busy_until, ep_task, ep_start, mark, max_out):  # pragma: no cover - compiled
    """The engine's loop (:func:`~atpsim.engine.joint.engine._run_graph`) with *t_live* the
    live episodes' next event, until the engine is needed: DONE, SUBMIT, ADVANCE or GROW."""
    while True:
        if iv[HEAP_N] + max(max_out, iv[PEND_N]) >= len(ht) or iv[N_EP] + iv[PEND_N] >= len(ep_task):
            return GROW
        if iv[HEAP_N] == 0 and iv[PEND_N] == 0 and t_live == math.inf:
            return DONE
        t_task = ht[0] if iv[HEAP_N] else math.inf
        if iv[PEND_N] and min(t_task, t_live) > fv[0]:
            lone_calls(key_of, call_of, key_shape, key_rel, sh_ptr, sh_links, sh_max, holder, busy_until, ep_task,
                       ep_start, mark, finish, version, pending, ht, hs, hk, hv, iv, fv)
            if iv[PEND_N]:
                return SUBMIT
        elif t_live <= t_task:
            return ADVANCE
        else:
            t, task, v = pop(ht, hs, hk, hv, iv)
            if v != version[task] or not math.isnan(finish[task]):
                continue
            fv[0] = t
            finish[task] = t
            iv[ENDED] += 1
            for q in range(rptr[task], rptr[task + 1]):
                child = ridx[q]
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready(child, t, kind, seconds, fraction, start, version, pending, ht, hs, hk, hv, iv)


HELPERS = ("push", "pop", "ready", "start_roots", "handle", "lone_calls", "run")
ENTRY = ("start_roots", "handle", "run")


@functools.cache
def compiled() -> dict[str, Callable[..., Any]] | None:
    """The entry functions compiled by numba (cached on disk), None where numba is missing;
    the helpers inlined into them."""
    try:
        from numba import njit
    except ImportError:  # pragma: no cover
        return None
    load_cpu_target()
    entry, inlined = njit(cache=True, error_model="numpy"), njit(cache=True, error_model="numpy", inline="always")
    module = globals()
    for name in HELPERS:
        module[name] = (entry if name in ENTRY else inlined)(module[name])
    return {name: module[name] for name in ENTRY}


def compile_clock() -> bool:
    """Compile the entry functions now (numba caches the machine code on disk): each run
    once on two tasks, a delay and a comm task after it. Whether numba is installed."""
    functions = compiled()
    if functions is None:  # pragma: no cover - numba is a dependency
        return False
    i64, n = np.int64, 2
    kind, seconds, fraction = np.array([DELAY, COMM], dtype=i64), np.array([1e-6, 0.0]), np.zeros(n)
    waiting, rptr, ridx = np.array([0, 1], dtype=i64), np.array([0, 1, 1], dtype=i64), np.array([1], dtype=i64)
    start, finish, version, pending = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=i64), np.zeros(n, dtype=i64)
    heap, iv, fv = empty_heap(8), np.zeros(6, dtype=i64), np.zeros(1)
    functions["start_roots"](waiting, kind, seconds, fraction, start, version, pending, *heap, iv)
    table = (np.array([-1, 0], dtype=i64), np.zeros(n, dtype=i64), np.full(1, -1, dtype=i64), np.zeros(1),
             np.zeros(1, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0), np.zeros(1, dtype=i64), np.zeros(1),
             np.zeros(8, dtype=i64), np.zeros(8), np.zeros(1, dtype=i64))  # fmt: skip
    assert functions["run"](math.inf, kind, seconds, fraction, rptr, ridx, waiting, start, finish, version, pending,
                            *heap, iv, fv, *table, 1) == SUBMIT  # fmt: skip
    functions["handle"](np.array([1], dtype=i64), np.array([2e-6]), np.array([True]), finish, version, *heap, iv, fv)
    return True


def plain() -> dict[str, Callable[..., Any]]:
    """The entry functions as written (for the tests)."""
    return {name: globals()[name] for name in ENTRY}


def empty_heap(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Heap arrays (time, sequence, task, version) with room for *size* entries."""
    return np.empty(size), np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
