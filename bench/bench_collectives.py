"""Benchmark the collective engine: wall time and simulated flows per second.

    python bench/bench_collectives.py              # the issue's cases (all-reduce of 1 GiB)
    python bench/bench_collectives.py --reference  # also the plain reference run

Each case prints: the engine asked for, the path that ran (the reductions and the solver,
e.g. ``replicated+symmetry+longest-path``), topology build time, the first (cold)
simulation's wall time, a repeat call (memoized), flows, flows/s (= transfers in the
schedule / cold wall time), simulated time and busbw.
"""

from __future__ import annotations

import argparse
import time

from atpsim.api import DeviceMesh, build_schedule, load_topology, run_collective

NBYTES = 2**30
#: The reference run is not run past this many transfers (it would take minutes).
MAX_REFERENCE_FLOWS = 3_000_000

CASES = [
    ("torus:32x32", "ring", "all"),
    ("torus:32x32", "bidirectional-ring", "all"),
    ("torus:32x32", "rabenseifner", "all"),
    ("nvlink-network-switch:4096", "ring", "all"),
    ("nvlink-network-switch:4096", "bidirectional-ring", "all"),
    ("nvlink-network-switch:4096", "rabenseifner", "all"),
    ("torus:64x64", "ring", "dim1:64x64"),
    ("torus:64x64", "rabenseifner", "dim1:64x64"),
    # contended: dimension-1 groups interleave on the torus rows and share their links
    ("torus:64x64", "ring", "dim1:1024x4"),
    ("torus:64x64", "bidirectional-ring", "dim1:1024x4"),
    ("torus:64x64", "ring", "dim1:2048x2"),
    ("torus:64x64", "rabenseifner", "dim1:1024x4"),
]


def groups_for(spec: str, n_gpus: int) -> list[list[int]]:
    if spec == "all":
        return [list(range(n_gpus))]
    d1, d2 = (int(x) for x in spec.split(":")[1].split("x"))
    return DeviceMesh(d1, d2).groups(int(spec[3]))


def bench(spec: str, algorithm: str, group_spec: str, engine: str) -> None:
    t0 = time.perf_counter()
    topo = load_topology(spec)
    t1 = time.perf_counter()
    groups = groups_for(group_spec, topo.n_gpus)
    n_flows = build_schedule("all_reduce", algorithm, groups, NBYTES).n_transfers
    if engine == "reference" and n_flows > MAX_REFERENCE_FLOWS:
        print(f"{spec:<28} {algorithm:<18} {group_spec:<11} {engine:<9} skipped: {n_flows} flows")
        return
    result = run_collective(topo, "all_reduce", algorithm, groups, NBYTES, engine=engine)
    t2 = time.perf_counter()
    run_collective(topo, "all_reduce", algorithm, groups, NBYTES, engine=engine)
    t3 = time.perf_counter()
    p = len(groups[0])
    cold = t2 - t1
    print(
        f"{spec:<28} {algorithm:<18} {group_spec:<11} {engine:<9} {result.path:<32}"
        f" {t1 - t0:7.2f} {cold:8.2f} {(t3 - t2) * 1e6:8.1f}"
        f" {result.n_flows:>10} {result.n_flows / cold:>12.3g}"
        f" {result.time_s * 1e3:10.3f} {result.busbw_Bps('all_reduce', p, NBYTES) / 1e9:8.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true",
                        help="also run engine='reference' (slow for rings)")
    args = parser.parse_args()
    print(f"all-reduce of {NBYTES} B per rank")
    print(
        f"{'topology':<28} {'algorithm':<18} {'groups':<11} {'asked':<9} {'path':<32}"
        f" {'build_s':>7} {'wall_s':>8} {'memo_us':>8} {'flows':>10} {'flows/s':>12}"
        f" {'sim_ms':>10} {'busbw':>8}"
    )
    engines = ["auto", "reference"] if args.reference else ["auto"]
    for engine in engines:
        for spec, algorithm, group_spec in CASES:
            bench(spec, algorithm, group_spec, engine)


if __name__ == "__main__":
    main()
