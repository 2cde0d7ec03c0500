"""Benchmark the event engine on issue 16's cases: wall time and peak RSS, one process each.

    python bench/bench_engine.py                   # every case, the compiled event loop
    python bench/bench_engine.py --loop simpy      # the same with the simpy loop (before)
    python bench/bench_engine.py a2a-fat rab-torus # some cases by name
    python bench/bench_engine.py --timeout 120     # give up on a case after 120 s

Each case runs in a fresh interpreter (``--one NAME``), so its peak RSS is its own, and the
wall time includes building the topology (not importing atpsim); so does the CPU time (user +
system, steadier than the wall time on a shared machine). Collectives move 1 GiB per
rank, as ``atpsim collective --bytes 1G`` does; ``plan`` is ``atpsim plan --topology
ib-cluster:512x8 --model M3 --devices 4096``. ``--loop simpy`` (``ATPSIM_EVENT_LOOP=simpy``) runs the
event loop the engine had before the compiled kernel (``atpsim/engine/solvers/flow_kernel.py``)
at every size, every other part of the engine unchanged.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import time

NBYTES = 2**30

#: name -> (topology, op, algorithm, groups, devices) or the plan command.
CASES: dict[str, tuple[str, str, str, str, int | None]] = {
    "a2a-fat": ("ib-cluster:128x8", "all_to_all", "pairwise", "all", None),
    "a2a-torus": ("torus:32x32", "all_to_all", "pairwise", "all", None),
    "rab-fat": ("ib-cluster:2048x8", "all_reduce", "rabenseifner", "all", None),
    "rab-torus": ("torus:256x256", "all_reduce", "rabenseifner", "all", None),
    "ring-dim1": ("ib-cluster:128x8", "all_reduce", "ring", "dim1:128x8", None),
    "four-rings": ("ib-cluster:512x8", "all_reduce", "ring", "dim2:4x1024", None),
    "hd-ring": ("torus:4096", "all_reduce", "rabenseifner", "all", None),
    "plan": ("ib-cluster:512x8", "plan", "M3", "", 4096),
    # the fat tree the issue measured: 20-port leaves, so nodes straddle leaves and routes collide
    "a2a-fat-20": ("ib-cluster:128x8,leaf_size=20", "all_to_all", "pairwise", "all", None),
    "rab-fat-20": ("ib-cluster:2048x8,leaf_size=20", "all_reduce", "rabenseifner", "all", None),
    "ring-dim1-20": ("ib-cluster:128x8,leaf_size=20", "all_reduce", "ring", "dim1:128x8", None),
    "four-rings-20": ("ib-cluster:512x8,leaf_size=20", "all_reduce", "ring", "dim2:4x1024", None),
    "plan-20": ("ib-cluster:512x8,leaf_size=20", "plan", "M3", "", 4096),
}


def groups_for(spec: str, n_gpus: int) -> list[list[int]]:
    from atpsim.api import DeviceMesh

    if spec == "all":
        return [list(range(n_gpus))]
    d1, d2 = (int(x) for x in spec.split(":")[1].split("x"))
    return DeviceMesh(d1, d2).groups(int(spec[3]))


def run_one(name: str) -> None:
    """Run case *name* here and print one line: path, wall (s), peak RSS (MB), simulated."""
    topology, op, algorithm, groups, devices = CASES[name]
    t0, cpu0 = time.perf_counter(), _cpu_s(resource.getrusage(resource.RUSAGE_SELF))
    if op == "plan":
        args = ["atpsim", "plan", "--topology", topology, "--model", algorithm,
                "--devices", str(devices)]
        out = subprocess.run(args, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = (out.stdout.strip().splitlines() or ["-"])[-1][:40]
        print(f"exit {out.returncode}\t{wall:.2f}\t{_cpu_s(usage):.2f}\t{usage.ru_maxrss / 1e3:.0f}"
              f"\t{best}")
        return
    from atpsim.api import load_topology, run_collective

    topo = load_topology(topology)
    result = run_collective(topo, op, algorithm, groups_for(groups, topo.n_gpus), NBYTES)
    path, simulated = result.path, f"{result.time_s * 1e3:.6f} ms"
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{path}\t{wall:.2f}\t{_cpu_s(usage) - cpu0:.2f}\t{usage.ru_maxrss / 1e3:.0f}"
          f"\t{simulated}")


def _cpu_s(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds: on a shared machine, steadier than the wall time."""
    return usage.ru_utime + usage.ru_stime


def run_case(name: str, loop: str, timeout_s: float) -> str:
    """Case *name* in a fresh interpreter (its own session, killed whole on timeout)."""
    cmd = [sys.executable, __file__, "--one", name]
    env = {**os.environ, "ATPSIM_EVENT_LOOP": loop}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, start_new_session=True) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return f"-\t> {timeout_s:.0f}\t-\t-\t-"
    lines = stdout.strip().splitlines()
    return lines[-1] if child.returncode == 0 and lines else f"failed ({stderr.strip()[-80:]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", choices=[*CASES, []], help="default: all")
    parser.add_argument("--loop", choices=("kernel", "simpy"), default="kernel")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    print(f"loop: {args.loop}")
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print("case\tpath\twall_s\tcpu_s\tpeak_rss_MB\tsimulated")
    for name in args.cases or CASES:
        print(f"{name}\t{run_case(name, args.loop, args.timeout)}", flush=True)


if __name__ == "__main__":
    main()
