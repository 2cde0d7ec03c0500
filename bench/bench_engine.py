"""Benchmark collectives and ``plan`` as users run them: wall time, CPU and peak RSS, one
process each.

    python bench/bench_engine.py                   # every case, the compiled event loop
    python bench/bench_engine.py --plain           # each case also as the plain run, compared
    python bench/bench_engine.py --loop simpy      # the same with the simpy loop (before)
    python bench/bench_engine.py a2a-fat rab-torus # some cases by name
    python bench/bench_engine.py --timeout 120     # give up on a case after 120 s

A collective case is ``atpsim collective -t TOPOLOGY --op OP [-a ALGORITHM] [--groups G]
--bytes 1G`` with every other option at its default (protocol ``auto``: NCCL's tuner on the
machines NCCL runs on, bare links on tori and the NVLink-Network switch; engine ``auto``: the
exact shortcuts), through :func:`atpsim.collective`, the function the command calls; the
command line of each case is printed with it. ``--plain`` runs each case once more with
``--engine reference`` (every flow of every candidate (algorithm, protocol) in one
event-driven run, no reduction, no pruning) and prints the relative difference of the two
times; a plain run past ``--timeout`` or over the memory cap is reported as such. Each run
is in a fresh interpreter (``--one NAME``), so its peak RSS is its own, and the wall time
includes building the topology (not importing atpsim); so does the CPU time (user + system,
steadier than the wall time on a shared machine). ``plan`` is ``atpsim plan --topology
ib-cluster:512x8 --model M3 --devices 4096``. ``--loop simpy`` (``ATPSIM_EVENT_LOOP=simpy``)
runs the event loop the engine had before the compiled kernel
(``atpsim/engine/solvers/flow_kernel.py``) at every size, every other part of the engine
unchanged.
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

#: name -> (topology, op, algorithm (None: the command's default, auto), groups, devices) or
#: the plan command.
CASES: dict[str, tuple[str, str, str | None, str, int | None]] = {
    "a2a-fat": ("ib-cluster:128x8", "all_to_all", None, "all", None),
    "a2a-torus": ("torus:32x32", "all_to_all", None, "all", None),
    "rab-fat": ("ib-cluster:2048x8", "all_reduce", "rabenseifner", "all", None),
    "rab-torus": ("torus:256x256", "all_reduce", "rabenseifner", "all", None),
    "ring-dim1": ("ib-cluster:128x8", "all_reduce", "ring", "dim1:128x8", None),
    "four-rings": ("ib-cluster:512x8", "all_reduce", "ring", "dim2:4x1024", None),
    "hd-ring": ("torus:4096", "all_reduce", "rabenseifner", "all", None),
    "plan": ("ib-cluster:512x8", "plan", "M3", "", 4096),
    # the fat tree the issue measured: 20-port leaves, so nodes straddle leaves and routes collide
    "a2a-fat-20": ("ib-cluster:128x8,leaf_size=20", "all_to_all", None, "all", None),
    "rab-fat-20": ("ib-cluster:2048x8,leaf_size=20", "all_reduce", "rabenseifner", "all", None),
    "ring-dim1-20": ("ib-cluster:128x8,leaf_size=20", "all_reduce", "ring", "dim1:128x8", None),
    "four-rings-20": ("ib-cluster:512x8,leaf_size=20", "all_reduce", "ring", "dim2:4x1024", None),
    "plan-20": ("ib-cluster:512x8,leaf_size=20", "plan", "M3", "", 4096),
}


def command_line(name: str) -> str:
    """The command a user types for case *name*."""
    topology, op, algorithm, groups, devices = CASES[name]
    if op == "plan":
        return f"atpsim plan --topology {topology} --model {algorithm} --devices {devices}"
    return " ".join(["atpsim collective -t", topology, *(["--op", op] if op != "all_reduce" else []),
                     *(["-a", algorithm] if algorithm else []),
                     *(["--groups", groups] if groups != "all" else []), "--bytes 1G"])


def run_one(name: str, plain: bool) -> None:
    """Run case *name* here (*plain*: with ``engine="reference"``) and print one line: path,
    protocol, wall (s), CPU (s), peak RSS (MB), simulated."""
    topology, op, algorithm, groups, devices = CASES[name]
    t0, cpu0 = time.perf_counter(), _cpu_s(resource.getrusage(resource.RUSAGE_SELF))
    if op == "plan":
        args = ["atpsim", "plan", "--topology", topology, "--model", str(algorithm),
                "--devices", str(devices)]
        out = subprocess.run(args, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = (out.stdout.strip().splitlines() or ["-"])[-1][:40]
        print(f"exit {out.returncode}\t-\t{wall:.2f}\t{_cpu_s(usage):.2f}\t{usage.ru_maxrss / 1e3:.0f}"
              f"\t{best}")
        return
    from atpsim.api import AtpsimError, collective

    try:
        row = collective(topology, op, NBYTES, algorithm=algorithm, groups=groups,
                         engine="reference" if plain else "auto").rows[0]
    except AtpsimError as error:  # a plain run over the memory cap is refused before it starts
        print(f"refused\t-\t-\t-\t-\t{error.message[:90]}")
        return
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{row.path}\t{row.protocol}\t{wall:.2f}\t{_cpu_s(usage) - cpu0:.2f}"
          f"\t{usage.ru_maxrss / 1e3:.0f}\t{row.time_s * 1e3:.9f} ms")


def _cpu_s(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds: on a shared machine, steadier than the wall time."""
    return usage.ru_utime + usage.ru_stime


def run_case(name: str, loop: str, timeout_s: float, plain: bool = False) -> str:
    """Case *name* in a fresh interpreter (its own session, killed whole on timeout)."""
    cmd = [sys.executable, __file__, "--one", name, *(["--plain"] if plain else [])]
    env = {**os.environ, "ATPSIM_EVENT_LOOP": loop}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, start_new_session=True) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return f"-\t-\t> {timeout_s:.0f}\t-\t-\t-"
    lines = stdout.strip().splitlines()
    return lines[-1] if child.returncode == 0 and lines else f"failed ({stderr.strip()[-80:]})"


def relative_difference(fast: str, plain: str) -> str:
    """|fast - plain| / plain of two printed simulated times, or '-' where one is missing."""
    try:
        a, b = (float(line.split("\t")[-1].split()[0]) for line in (fast, plain))
    except (ValueError, IndexError):
        return "-"
    return f"{abs(a - b) / b:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", choices=[*CASES, []], help="default: all")
    parser.add_argument("--loop", choices=("kernel", "simpy"), default="kernel")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--plain", action="store_true",
                        help="also run each collective with --engine reference and compare")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args.plain)
        return
    print(f"loop: {args.loop}")
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print("case\trun\tpath\tprotocol\twall_s\tcpu_s\tpeak_rss_MB\tsimulated\trel_diff")
    for name in args.cases or CASES:
        print(f"# {name}: {command_line(name)}", flush=True)
        fast = run_case(name, args.loop, args.timeout)
        print(f"{name}\tshortcuts\t{fast}", flush=True)
        if args.plain and CASES[name][1] != "plan":
            plain = run_case(name, args.loop, args.timeout, plain=True)
            print(f"{name}\tplain\t{plain}\t{relative_difference(fast, plain)}", flush=True)


if __name__ == "__main__":
    main()
