"""A batch of points of one topology (what the Dask executor sends a worker, issue 15) builds
the topology once and reuses the engine's memo of collectives: a second point that asks the
same collectives simulates none."""

from __future__ import annotations

from atpsim.api import simulate_point
from atpsim.compute.models import MODEL_PRESETS
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.point import SweepPoint
from atpsim.sweep.dask_executor import simulate_batch


def test_a_batch_builds_its_topology_once_and_reuses_the_engine_memo(monkeypatch):
    import atpsim.engine.collective as engine
    import atpsim.topology.spec as spec

    built, simulated = [], []
    build, run = spec._build, engine._run
    monkeypatch.setattr(spec, "_CACHE", {})
    monkeypatch.setattr(spec, "_build", lambda *a: built.append(a) or build(*a))
    monkeypatch.setattr(engine, "_run", lambda *a, **k: simulated.append(a[1]) or run(*a, **k))
    points = [
        SweepPoint(scenario=name, topology={"preset": "ic3"}, topology_label="ic3", n_devices=4,
                   hardware="a100-sxm4-80gb", model=MODEL_PRESETS["M1"], tp=DeviceMesh(2, 2))
        for name in ("first", "second")
    ]  # fmt: skip
    rows = simulate_batch(simulate_point, [(0, points[0])])
    after_first = len(simulated)
    rows += simulate_batch(simulate_point, [(1, points[1])])
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert len(built) == 1 and after_first > 0 and len(simulated) == after_first
    assert rows[0]["step_time_s"] == rows[1]["step_time_s"]
