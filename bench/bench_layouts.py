"""Benchmark issue 28's whole-job cases as users run them: CPU seconds and peak RSS of each
command, one process each.

    python bench/bench_layouts.py                     # every case
    python bench/bench_layouts.py tp4-pp8x12-512-h100 # some cases by name
    python bench/bench_layouts.py --plain             # each job also unfolded, compared
    python bench/bench_layouts.py --timeout 300       # give up on a command after 300 s
    python bench/bench_layouts.py --repeat 3          # three rounds; each case's least CPU s

Each command runs with bytecode caching on and the package compiled first, as an installed
package imports. A job case is ``atpsim run CASE.yaml -o DIR --no-progress`` on a one-point scenario written
from :data:`JOBS` (the defaults for everything it does not name: one network, the folded
graph where it applies); the plan case is the ``atpsim plan`` command of :data:`PLAN`. The
command and the scenario are printed with each case. CPU is user + system of the command's
process (steadier than the wall time on a shared machine), peak RSS its own (``os.wait4``).
``--plain`` runs each job once more through the API with the graph unfolded (every replica
and TP rank its own tasks: ``atpsim.api.simulate_job(..., fold=False)``, what the command did
before issue 28's folding) and prints both iteration times and their relative
difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

H100 = {"builder": "ib-cluster", "gpus_per_node": 8, "generation": "h100", "label": "h100"}
A100 = {"builder": "ib-cluster", "gpus_per_node": 8, "generation": "a100", "label": "a100"}
P4D = {"builder": "ib-cluster", "nodes": 120, "gpus_per_node": 8, "generation": "a100",
       "nics_per_node": 4, "nic_bandwidth": "100 Gb/s", "label": "p4d-efa"}  # fmt: skip
# One layout each: sequence parallelism named (a scenario that leaves it out runs each 1D
# layout both ways, two points; until 2026-11-27 these rows did, and timed both)
GPT3_A100 = {"tp": [[4, 1]], "pp": 16, "dp": "auto", "micro_batch": 1, "global_batch": 1536,
             "sequence_parallel": True,
             "recompute": "selective", "zero": 1, "vocab": 51200}  # fmt: skip

#: name -> (topology, hardware, parallelism) of GPT-3 175B, the issue's table's rows.
JOBS: dict[str, tuple[dict, str, dict]] = {
    # NVIDIA's published recipe layout: TP 4, PP 8 with 12 virtual stages (interleaved 1F1B)
    "tp4-pp8x12-512-h100": (H100, "h100-sxm", {
        "devices": 512, "tp": [[4, 1]], "pp": 8, "virtual_stages": 12, "dp": "auto", "micro_batch": 1,
        "global_batch": 1024, "schedule": "interleaved", "sequence_parallel": True,
        "recompute": "selective", "zero": 1}),
    "tp4-pp16-1024-a100": (A100, "a100-sxm4-80gb", {"devices": 1024, **GPT3_A100}),
    "tp4-pp16-16384-a100": (A100, "a100-sxm4-80gb", {"devices": 16384, **GPT3_A100}),
    # the SageMaker seed's cluster: 120 nodes, 4 EFA NICs each (two GPUs a NIC)
    "tp8-pp6-960-p4d": (P4D, "a100-sxm4-40gb", {
        "tp": [[8, 1]], "pp": 6, "dp": 20, "micro_batch": 2, "global_batch": 2560,
        "sequence_parallel": False, "recompute": "full", "zero": 1, "offload_activations": True}),
}  # fmt: skip

PLAN = ["atpsim", "plan", "-m", "gpt3-175b", "-t", "ib-cluster:128x8,generation=h100",
        "--hardware", "h100-sxm", "--global-batch", "1536", "--vocab", "51200",
        "--recompute", "selective", "--zero", "1", "--chunks", "1,2", "--no-progress"]  # fmt: skip


def scenario(name: str) -> dict:
    """The one-point scenario of job case *name* (one network: ``network: joint``)."""
    topology, hardware, parallelism = JOBS[name]
    return {"name": name, "description": f"issue 28 benchmark case {name}",
            "cases": [{"topology": [topology], "hardware": hardware, "model": "gpt3-175b",
                       "parallelism": {**parallelism, "network": "joint"}}]}  # fmt: skip


def measured(args: list[str], timeout: float) -> tuple[float, float, int, str]:
    """Run *args*: (CPU s, peak RSS MB, exit status, its output's last line); status -9
    where it ran past *timeout* seconds (killed)."""
    with tempfile.TemporaryFile("w+") as out:
        child = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=_env())
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(child.pid, signal.SIGKILL)
                _, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.05)
        out.seek(0)
        lines = out.read().strip().splitlines() or ["-"]
    code = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code, lines[-1]


def _env() -> dict[str, str]:
    """The commands' environment: this one, bytecode caching on (an installed package imports
    from compiled bytecode; a shell with PYTHONDONTWRITEBYTECODE set would compile the
    package's sources in every command, ~0.5 CPU s)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _compile_package() -> None:
    """Compile atpsim's modules to bytecode and its joint loop's functions (numba, cached on
    disk) once, before anything is timed (found, not imported: this script reaches the
    package only through its commands and the API)."""
    spec = importlib.util.find_spec("atpsim")
    assert spec is not None and spec.submodule_search_locations, "atpsim is not installed"
    subprocess.run([sys.executable, "-m", "compileall", "-q", spec.submodule_search_locations[0]],
                   check=True, env=_env())  # fmt: skip
    # the joint loop's machine code, as numba caches it on the first large job after an install
    subprocess.run([sys.executable, "-c", "import atpsim.api; atpsim.api.compile_joint_loop()"],
                   check=True, env=_env())  # fmt: skip


def api_topology(entry: dict) -> dict:
    """A scenario's topology entry as the API takes it: no ``label``, unit suffixes on the
    builder's parameter names and the values in bytes/s (``nic_bandwidth: 100 Gb/s`` is
    ``nic_bandwidth_Bps: 12.5e9``)."""
    from atpsim.api import parse_bandwidth

    out = {}
    for key, value in entry.items():
        if key == "label":
            continue
        if key.endswith("bandwidth"):
            key, value = f"{key}_Bps", parse_bandwidth(value)
        out[key] = value
    return out


def plain_one(name: str) -> None:
    """The job case *name* unfolded through the API; prints its iteration time as JSON."""
    from atpsim.api import simulate_job

    topology, hardware, p = JOBS[name]
    topology = api_topology(topology)
    devices = p.get("devices") or 960
    tp = tuple(p["tp"][0])
    dp = p["dp"] if p["dp"] != "auto" else devices // (tp[0] * tp[1] * p["pp"])
    options = {k: v for k, v in p.items() if k in ("recompute", "zero", "vocab", "sequence_parallel",
                                                   "virtual_stages", "offload_activations")}  # fmt: skip
    if p.get("schedule") == "interleaved":
        options["schedule"] = "interleaved-1f1b"
    prediction = simulate_job(topology, "gpt3-175b", tp=tp, pp=p["pp"], dp=dp, micro_batch=p["micro_batch"],
                              global_batch=p["global_batch"], hardware=hardware, fold=False, **options)  # fmt: skip
    print(json.dumps({"iteration_s": prediction.iteration_time_s}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"of {', '.join([*JOBS, 'plan'])} (default: all)")
    parser.add_argument("--plain", action="store_true", help="also run each job unfolded and compare")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a command may take")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds over the cases; then each case's least CPU s and every round's")
    parser.add_argument("--plain-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_one:
        plain_one(args.plain_one)
        return
    names = args.cases or [*JOBS, "plan"]
    _compile_package()
    print(f"{'case':<22} {'CPU s':>8} {'peak MB':>8} {'exit':>4}  result")
    runs: dict[str, list[tuple[float, float, str]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(max(args.repeat, 1)):
            for name in names:
                cpu, rss, code, result = run_case(name, Path(tmp), args.timeout)
                print(f"{name:<22} {cpu:>8.1f} {rss:>8.0f} {code:>4}  {result}")
                runs[name].append((cpu, rss, result))
                if args.plain and name != "plan":
                    plain_case(name, result, args.timeout)
    if args.repeat > 1:
        print(f"\nleast CPU s of {args.repeat} rounds (every round's in order), largest peak RSS:")
        for name, rows in runs.items():
            cpus = ", ".join(f"{cpu:.1f}" for cpu, _, _ in rows)
            print(f"{name:<22} {min(c for c, _, _ in rows):>8.1f} {max(r for _, r, _ in rows):>8.0f}  ({cpus})")


def run_case(name: str, tmp: Path, timeout: float) -> tuple[float, float, int, str]:
    """Case *name* once, as a user runs it: (CPU s, peak RSS MB, exit status, its result)."""
    if name == "plan":
        print("  $ " + " ".join(PLAN))
        cpu, rss, code, last = measured(PLAN, timeout)
        return cpu, rss, code, last[:60]
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario(name), sort_keys=False))
    command = ["atpsim", "run", str(path), "-o", str(tmp / name), "--no-progress"]
    print(f"  $ atpsim run {name}.yaml -o {name} --no-progress   # {json.dumps(JOBS[name][2])}")
    cpu, rss, code, _ = measured(command, timeout)
    return cpu, rss, code, f"iteration {_iteration(tmp / name / 'results.csv')} s"


def plain_case(name: str, result: str, timeout: float) -> None:
    """Job *name* unfolded through the API, its iteration against the command's *result*."""
    plain = [sys.executable, __file__, "--plain-one", name]
    cpu, rss, code, last = measured(plain, timeout)
    folded = float(result.split()[1]) if result.startswith("iteration ") else float("nan")
    unfolded = json.loads(last)["iteration_s"] if code == 0 else float("nan")
    diff = abs(unfolded - folded) / unfolded if code == 0 else float("nan")
    print(f"{'  unfolded (API)':<22} {cpu:>8.1f} {rss:>8.0f} {code:>4}  iteration "
          f"{unfolded!r} s; relative difference {diff:.1e} (results.csv keeps 10 digits)")  # fmt: skip


def _iteration(results: Path) -> str:
    import csv

    if not results.exists():
        return "-"
    rows = list(csv.DictReader(results.open()))
    return rows[0]["iteration_time_s"] if rows else "-"


if __name__ == "__main__":
    main()
