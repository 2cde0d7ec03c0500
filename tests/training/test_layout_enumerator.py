"""The one layout enumerator (:mod:`atpsim.training.layouts`) that the step and job planners,
the search and job scenarios share: its meshes and layouts, in order, derived by hand."""

from __future__ import annotations

from atpsim.compute.models import model_preset
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.layouts import auto_dps, candidates, job_layouts, layout_grid, tp_meshes


def sizes(meshes: list[DeviceMesh]) -> list[tuple[int, int, str]]:
    return [(m.d1, m.d2, m.placement) for m in meshes]


def test_meshes_of_every_size_up_to_max_tp_that_divides_the_devices():
    """12 GPUs, max_tp 4: sizes 1, 2, 3, 4 divide 12; each size's factorizations (t, 1) to (1, t)."""
    pairs = [(m.d1, m.d2) for m in tp_meshes(12, 4)]
    assert pairs == [(1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (4, 1), (2, 2), (1, 4)]


def test_listed_meshes_come_first_and_each_pair_once():
    """Listed 2x2 first; sizes 4 (dividing 8) then 3 (not dividing 8: skipped); 2x2 once."""
    meshes = tp_meshes(8, sizes=(4, 3), listed=[DeviceMesh(2, 2)])
    assert [(m.d1, m.d2) for m in meshes] == [(2, 2), (4, 1), (1, 4)]


def test_split_hidden_keeps_the_meshes_whose_dimensions_divide_it():
    """Hidden 12 over 8 GPUs: 8x1 and 1x8 leave a remainder, 4x2 and 2x4 divide it."""
    assert [(m.d1, m.d2) for m in tp_meshes(8, sizes=(8,), split_hidden=12)] == [(4, 2), (2, 4)]


def test_each_mesh_at_each_placement():
    meshes = tp_meshes(2, placements=("row-major", "column-major"))
    assert sizes(meshes) == [(1, 1, "row-major"), (1, 1, "column-major"), (2, 1, "row-major"),
                             (2, 1, "column-major"), (1, 2, "row-major"), (1, 2, "column-major")]  # fmt: skip


def test_auto_dps_fills_the_devices_or_gives_none():
    """8 GPUs: TP 2 x pp 2 leaves dp 2; TP 2 x pp 3 does not divide 8; dp 2 not among (4,)."""
    assert auto_dps(8)(DeviceMesh(2, 1), 2) == [2]
    assert auto_dps(8)(DeviceMesh(2, 1), 3) == []
    assert auto_dps(8, (4,))(DeviceMesh(2, 1), 2) == []


def test_layout_grid_walks_mesh_pp_dp_batch_then_axes_in_order():
    """Two meshes x depths 1, 2 on 4 GPUs; virtual stages 2 only with the interleaved schedule."""
    meshes = [DeviceMesh(2, 1), DeviceMesh(4, 1)]
    axes = {"schedule": ("1f1b", "interleaved-1f1b"), "virtual_stages": (1, 2)}
    grid = [(lay.mesh.d1, lay.pp, lay.dp, lay.fields["schedule"], lay.fields["virtual_stages"])
            for lay in layout_grid(meshes, (1, 2), auto_dps(4), (1,), (8,), axes)]  # fmt: skip
    per_layout = [("1f1b", 1), ("interleaved-1f1b", 1), ("interleaved-1f1b", 2)]
    assert grid == [(2, 1, 2, *s) for s in per_layout] + [(2, 2, 1, *s) for s in per_layout] \
        + [(4, 1, 1, *s) for s in per_layout]


def test_job_layouts_and_candidates_prune_a_mesh_that_splits_the_heads_unevenly():
    """gpt3-125m has 12 heads: TP 8 splits them unevenly (pruned by divisibility), TP 4 does not."""
    model = model_preset("gpt3-125m")
    configs = job_layouts(model, 8, [DeviceMesh(8, 1), DeviceMesh(4, 1)], (1,), (1,), (8,))
    found = [c if isinstance(c, str) else c.layout.tp.size for c in candidates(configs, 80e9)]
    assert found == ["divisibility", 4]
