"""Protocols do not cost the shortcuts (issue 28): a protocol's per-step latency is one fixed
term per call and its efficiency scales every link of a class alike, so the symmetry and
periodic reductions still apply with it. Each case: `atpsim collective` as users run it
(default engine, pruned tuner) against the plain run (``engine="reference"``: every flow of
every candidate, no reduction, no pruning), to 1e-9, and the reduction that ran named."""

import pytest

from atpsim.api import collective

CASES = [
    # (topology, op, algorithm, protocol, groups, the reduction expected in the path)
    ("torus:8x8", "all_reduce", "rabenseifner", "auto", "all", "symmetry"),
    ("torus:8x8", "all_reduce", "rabenseifner", "Simple", "all", "symmetry"),
    ("torus:8x8", "all_reduce", "rabenseifner", "LL", "all", "symmetry"),
    ("torus:8x8", "all_reduce", "ring", "LL128", "dim1:16x4", "symmetry"),
    ("torus:8x8", "all_to_all", None, "Simple", "all", "symmetry"),
    ("ib-cluster:4x8", "all_to_all", None, "auto", "all", "symmetry"),
    ("ib-cluster:4x8", "all_reduce", "ring", "auto", "dim1:8x4", "replicated"),
    ("torus:8x8", "all_reduce", "ring", "LL128", "dim1:32x2", "periodic"),
    ("nvlink-network-switch:64", "all_reduce", "bidirectional-ring", "LL", "all", "periodic"),
]


@pytest.mark.parametrize("spec, op, algorithm, protocol, groups, reduction", CASES)
def test_the_default_path_is_the_plain_run(spec, op, algorithm, protocol, groups, reduction):
    kwargs = {"algorithm": algorithm, "protocol": protocol, "groups": groups}
    fast = collective(spec, op, ["64K", "16M"], **kwargs)
    plain = collective(spec, op, ["64K", "16M"], engine="reference", **kwargs)
    for row, ref in zip(fast.rows, plain.rows, strict=True):
        assert ref.path == "reference"
        assert reduction in row.path, row.path
        assert (row.algorithm, row.protocol) == (ref.algorithm, ref.protocol)
        assert row.time_s == pytest.approx(ref.time_s, rel=1e-9)
