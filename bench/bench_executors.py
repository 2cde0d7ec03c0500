"""Time the sweep driver's executors (issue 15): points per second and the driver's peak memory.

    python bench/bench_executors.py                 # 10,000 points; expand and run 100,000
    python bench/bench_executors.py --points 2000 --expand 20000

Runs a sweep of cheap points with ``run_scenario`` under ``-j 1`` (this process), ``-j 2``
(a process pool), ``--scheduler local`` (a Dask LocalCluster of 2 single-threaded worker
processes, started and stopped inside the timing) and a running 2-worker Dask cluster (started
before the timing, addressed as ``tcp://...``, as a remote cluster would be). The points are
not simulated: a fake function computes their row from their parameters in microseconds, so
what is timed is the executor and the driver (rows written and fsync'ed one by one to
results.partial.csv, the progress bookkeeping, the final table), i.e. each executor's cost
per point. The report (no figures) is timed apart by rebuilding it and left out of the rate.
Each configuration runs in its own process, so its peak RSS (``ru_maxrss``) is its own; with
Dask the scheduler runs in the driver's process and is counted in. Also prints Dask's cost
per task (empty tasks, one per task); the time and peak memory to expand, not run, a
scenario of ``--expand`` points, lazily (``len(SweepPoints)``: every point made and checked
once, none kept) and into a list (``expand_sweep``); and the time and the driver's peak memory
to run that scenario with ``-j 1``, report included, to show that streaming holds the
driver's memory flat from 10,000 to 100,000 points.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from atpsim.api import SweepPoints, expand_sweep, load_scenario, rebuild_report, run_scenario

#: Points per model in :func:`scenario`: 4 meshes of 8 GPUs x 2 chunk counts x 2 modes.
POINTS_PER_MODEL = 16
CONFIGS = ("-j 1", "-j 2", "dask local", "dask running")
#: Empty tasks timed one per task to measure Dask's cost per task.
EMPTY_TASKS = 2000


def scenario(n_points: int) -> dict[str, Any]:
    """A scenario of *n_points* (a multiple of 16): model M2 at n / 16 hidden sizes, every
    mesh of 8 GPUs on IC3, chunks 1 and 2, des and analytic; no figures, CSV only."""
    models = [
        {"preset": "M2", "name": f"h{128 * (k + 1)}", "hidden": 128 * (k + 1)}
        for k in range(n_points // POINTS_PER_MODEL)
    ]
    return {"name": "bench-executors", "topology": "ic3", "model": models,
            "parallelism": {"devices": 8, "meshes": "all"}, "chunks": [1, 2],
            "mode": ["des", "analytic"], "report": {"figures": []},
            "output": {"formats": ["csv"]}}  # fmt: skip


def cheap_simulate(point: Any) -> dict[str, Any]:
    """A fake simulation: a row from the point's parameters, in microseconds."""
    step_s = 1e-3 * point.model.hidden / 4096 / point.chunks * (1 + point.mesh.d2 / 16)
    return {"step_time_s": step_s, "tflops_per_gpu": 100.0 / step_s * 1e-3,
            "tflops_per_gpu_paper_unit": 90.0, "comm_over_delta": 1.0,
            "memory_per_rank_bytes": 1e6 * point.model.hidden * point.chunks / point.mesh.d1,
            "fits_memory": True}  # fmt: skip


def write_scenario(folder: Path, n_points: int) -> Path:
    path = folder / "scenario.yaml"
    path.write_text(json.dumps(scenario(n_points)))  # JSON is YAML
    return path


def peak_rss_MB() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(config: str, n_points: int, folder: Path) -> dict[str, Any]:
    """Run the sweep under *config* in *folder*; its timings, peak RSS and table."""
    path = write_scenario(folder, n_points)
    options: dict[str, Any] = {"jobs": 2 if config != "-j 1" else 1}
    if config == "dask local":
        options["scheduler"] = "local"
    if config == "dask running":
        return _on_running_cluster(path, folder, options)
    return _timed_run(path, folder, options)


def _timed_run(path: Path, folder: Path, options: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    run_scenario(path, folder / "out", simulate=cheap_simulate, progress=False, **options)
    run_s = time.perf_counter() - start
    start = time.perf_counter()
    rebuild_report(folder / "out")
    return {"run_s": run_s, "report_s": time.perf_counter() - start,
            "peak_rss_MB": peak_rss_MB(), "table": str(folder / "out" / "results.csv")}  # fmt: skip


def _on_running_cluster(path: Path, folder: Path, options: dict[str, Any]) -> dict[str, Any]:
    """The sweep on a 2-worker cluster started beforehand, then Dask's cost per empty task."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        result = _timed_run(path, folder, {**options, "scheduler": cluster.scheduler_address})
        with Client(cluster, set_as_default=False) as client:
            start = time.perf_counter()
            client.gather(client.map(abs, range(EMPTY_TASKS), pure=False))
            result["task_ms"] = (time.perf_counter() - start) / EMPTY_TASKS * 1e3
    return result


def expand_one(n_points: int, folder: Path, lazily: bool) -> dict[str, Any]:
    """Expand (not run) a loaded scenario of *n_points*, *lazily* (count and check) or into a
    list: seconds, then the Python memory a second expansion holds after and at most
    (tracemalloc; the RSS hides it: the points reuse what loading the scenario freed)."""
    scenario = load_scenario(write_scenario(folder, n_points), expand=False)
    start = time.perf_counter()
    count = len(SweepPoints(scenario) if lazily else expand_sweep(scenario))
    seconds = time.perf_counter() - start
    tracemalloc.start()  # a second expansion, traced: what it allocates and still holds
    points = SweepPoints(scenario) if lazily else expand_sweep(scenario)
    len(points)
    held, peak = tracemalloc.get_traced_memory()
    return {"points": count, "expand_s": seconds, "held_MB": held / 2**20,
            "traced_peak_MB": peak / 2**20, "peak_rss_MB": peak_rss_MB()}  # fmt: skip


def run_large(n_points: int, folder: Path) -> dict[str, Any]:
    """Run a scenario of *n_points* with -j 1, report included: seconds and peak RSS."""
    path = write_scenario(folder, n_points)
    before = peak_rss_MB()
    start = time.perf_counter()
    summary = run_scenario(path, folder / "out", simulate=cheap_simulate, progress=False)
    return {"points": summary.n_points, "run_s": time.perf_counter() - start,
            "rss_before_MB": before, "peak_rss_MB": peak_rss_MB()}  # fmt: skip


def child(args: argparse.Namespace) -> None:
    """One measurement in this fresh process, printed as JSON."""
    logging.getLogger("atpsim").setLevel(logging.ERROR)  # the long-sweep estimate is moot here
    with tempfile.TemporaryDirectory() as folder:
        if args.child in ("expand-lazily", "expand-list"):
            result = expand_one(args.expand, Path(folder), lazily=args.child == "expand-lazily")
        elif args.child == "run-large":
            result = run_large(args.expand, Path(folder))
        else:
            result = run_one(args.child, args.points, Path(folder))
            result["table"] = Path(result["table"]).read_bytes().decode()
    print(json.dumps(result))


def measure(args: argparse.Namespace, what: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", what, "--points", str(args.points),
               "--expand", str(args.expand)]  # fmt: skip
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000, help="points swept (x16)")
    parser.add_argument("--expand", type=int, default=100_000, help="points expanded and run (x16)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"{args.points} cheap points (a fake simulate function, not the simulator): the "
          "driver's and the executor's cost per point")  # fmt: skip
    print(f"{'executor':<44} {'sweep s':>8} {'points/s':>9} {'µs/point':>9} {'report s':>9} "
          f"{'peak RSS MB':>12}")  # fmt: skip
    tables, task_ms = set(), float("nan")
    for config in CONFIGS:
        r = measure(args, config)
        tables.add(r["table"])
        sweep_s = r["run_s"] - r["report_s"]
        print(f"{_label(config):<44} {sweep_s:>8.2f} {args.points / sweep_s:>9.0f} "
              f"{sweep_s / args.points * 1e6:>9.0f} {r['report_s']:>9.2f} "
              f"{r['peak_rss_MB']:>12.0f}")  # fmt: skip
        if "task_ms" in r:
            task_ms = r["task_ms"]
    print(f"results.csv byte-identical across executors: {'yes' if len(tables) == 1 else 'NO'}")
    print(f"Dask's cost per task ({EMPTY_TASKS} empty tasks on the running cluster): "
          f"{task_ms:.2f} ms")  # fmt: skip
    for what in ("expand-lazily", "expand-list"):
        e = measure(args, what)
        print(f"{what.replace('-', ' ')} (not run) {e['points']} points: {e['expand_s']:.2f} s, "
              f"{e['held_MB']:.1f} MB held after and {e['traced_peak_MB']:.1f} MB at most "
              f"(tracemalloc), peak RSS {e['peak_rss_MB']:.0f} MB (loading included)")  # fmt: skip
    r = measure(args, "run-large")
    print(f"run {r['points']} points with -j 1, report included: {r['run_s']:.1f} s "
          f"({r['run_s'] / r['points'] * 1e6:.0f} µs/point), peak RSS {r['peak_rss_MB']:.0f} MB "
          f"({r['rss_before_MB']:.0f} MB before)")  # fmt: skip


def _label(config: str) -> str:
    return {"-j 1": "-j 1 (this process)", "-j 2": "-j 2 (process pool)",
            "dask local": "--scheduler local (2 workers, start incl.)",
            "dask running": "running Dask cluster (2 workers)"}[config]  # fmt: skip


if __name__ == "__main__":
    main()
