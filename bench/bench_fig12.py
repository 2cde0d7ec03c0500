"""Time every event-engine (des) point of a scenario in one process, as one sweep worker would.

    python bench/bench_fig12.py                      # scenarios/fig12.yaml
    python bench/bench_fig12.py scenarios/fig11.yaml --slowest 5

Prints the slowest points (wall and CPU seconds) and the totals. CPU time is what a loaded
machine cannot inflate; ``atpsim run -j 2`` spreads the same work over two processes.
"""

from __future__ import annotations

import argparse
import time

from atpsim.api import expand_sweep, load_scenario, simulate_point


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="scenarios/fig12.yaml")
    parser.add_argument("--slowest", type=int, default=10, help="how many slowest points to list")
    args = parser.parse_args()
    points = [p for p in expand_sweep(load_scenario(args.scenario)) if p.mode == "des"]
    timed = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for point in points:
        w, c = time.perf_counter(), time.process_time()
        simulate_point(point)
        timed.append((time.process_time() - c, time.perf_counter() - w, point))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    print(f"{'topology':<10} {'N':>5} {'mesh':<10} {'algorithm':<18} {'cpu_s':>6} {'wall_s':>6}")
    for c, w, p in sorted(timed, key=lambda t: -t[0])[: args.slowest]:
        mesh = f"{p.mesh.d1}x{p.mesh.d2}"
        print(f"{p.topology_label:<10} {p.n_devices:>5} {mesh:<10} {p.algorithm:<18} {c:6.2f} {w:6.2f}")
    print(f"{len(points)} des points: {wall:.1f} s wall, {cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
