"""The cyclic garbage collector paused while a joint run builds and runs its task graph.

A joint run allocates millions of small objects that live until it ends (the graph's tuples
and lists, a cohort and an episode record per call, the task clock's heap entries) and makes
almost no reference cycles: over a whole ``atpsim run`` of the 512-H100 job of
``bench/bench_layouts.py`` (imports, the run, the report) the collector found 3,677
unreachable objects in 164 passes, which cost 0.63 s of its 9.5-9.9 s of CPU (measured with
``gc.callbacks``; bench/README.md, "the cyclic collector, paused"). Reference counting frees
everything else the moment it is dropped, so :func:`paused_collector` turns the collector off
for the run and back on after it: what little cyclic garbage the run makes is collected at
the next pass after it, and memory is what it was (the peak RSS of that run: 928 MB either
way).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    """Within it the cyclic collector does not run (where it was on: it is turned back on
    after, also on an error; where it was off, nothing changes)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
