"""A spliced template's tasks are the tasks it recorded, added one by one after its start
(atpsim/engine/joint/graph.py): the same graph arrays, and the same dependencies asked for
while building (a splice's are kept as its template's offsets until the graph is built)."""

from __future__ import annotations

import numpy as np

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.graph import GraphBuilder, Template

SPEC = CallSpec("nccl", "all_reduce", "ring", ((0, 1), (2, 3)), 2**20)


def _program(b: GraphBuilder, start: int) -> int:
    """A pass's tasks after *start*: compute, a collective, a marker, compute after both."""
    first = b.delay(1e-3, [start])
    comm = b.comm(b.call(SPEC), [1, 0], [first, start], block=1)
    marker = b.marker(0.5, 2e-3, [first])
    return b.delay(5e-4, [comm, marker])


def _template() -> Template:
    scratch = GraphBuilder()
    _program(scratch, scratch.delay(0.0))
    return Template.record(scratch)


def test_spliced_tasks_are_the_tasks_added_one_by_one() -> None:
    template = _template()
    spliced, listed = GraphBuilder(), GraphBuilder()
    for b, splice in ((spliced, True), (listed, False)):
        start = b.delay(0.0)
        ends = []
        for k in range(3):
            ready = b.delay(1e-4 * (k + 1), [start] + ends[-1:])
            ends.append(b.splice(template, ready) if splice else _program(b, ready))
        b.delay(0.0, ends)
    assert len(spliced) == len(listed)
    for task in range(len(listed)):
        assert spliced.deps_of(task) == listed.deps_of(task), task
    got, want = spliced.build(), listed.build()
    for name in ("kind", "seconds", "fraction", "call", "dep_ptr", "dep_idx", "uniform"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.groups == want.groups and got.calls == want.calls


def test_a_template_recorded_from_a_graph_with_splices_keeps_their_dependencies() -> None:
    inner = _template()
    scratch = GraphBuilder()
    start = scratch.delay(0.0)
    scratch.delay(1e-3, [scratch.splice(inner, start)])
    outer = Template.record(scratch)
    assert outer.deps == [scratch.deps_of(task) for task in range(1, len(scratch))]
    assert np.array_equal(outer.dep_lens, [len(d) for d in outer.deps])
    assert np.array_equal(outer.dep_flat, [d for row in outer.deps for d in row])
