"""Time whole training iterations on one network (issue 13), with and without a straggler,
and the plain joint engine's flow events per second.

    python bench/bench_joint.py                       # 1024, 4096 and 16384 GPUs
    python bench/bench_joint.py --gpus 1024 --plain-gpus 256

GPT-3 175B (Brown et al., 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048;
vocabulary 50,257 padded to 51,200) with TP 8 (one DGX A100 node), PP 16, 1F1B,
micro-batch 1, global batch 1536, on an InfiniBand fat tree of 8-GPU nodes
(``ib-cluster:Nx8``); DP fills the rest. Each row is one process (its peak resident memory is
its own): the iteration on the joint network (every call in flight shares links; the passes
are single delays, their NVLink traffic proven to meet nothing), unperturbed and with one
straggler GPU computing 1.2x slower (seed 1: it breaks the replicas' symmetry, the engine's
worst case), and the isolated composition for comparison.

The plain joint engine (one network of every flow and delay, no shortcut) runs the same
layout's task graph at a smaller size (``--plain-gpus``, global batch ``--plain-batch``):
flows, rate solves (events), wall time, events per second, and the engine with its
shortcuts on the same graph, whose task ends it must equal (checked to 1e-9).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from atpsim.api import ModelConfig, compare_plain, simulate_job

GPT3 = ModelConfig("gpt3-175b", hidden=12288, heads=96, layers=96, batch=1, seq=2048)
STRAGGLER = {"seed": 1, "stragglers": 1, "straggler_factor": 1.2}


def one(gpus: int, case: str) -> dict[str, object]:
    dp = gpus // (8 * 16)
    options = {"network": "isolated"} if case == "isolated" else \
        {"perturb": STRAGGLER} if case == "straggler" else {}
    start = time.perf_counter()
    p = simulate_job(f"ib-cluster:{gpus // 8}x8", GPT3, tp=(8, 1), pp=16, dp=dp, micro_batch=1,
                     global_batch=1536, vocab=51200, **options)  # fmt: skip
    return {"gpus": gpus, "case": case, "wall_s": time.perf_counter() - start,
            "peak_rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
            "iteration_s": p.iteration_time_s, "exposed_dp_s": p.exposed_dp_comm_s,
            "episodes": p.stats.get("episodes_solved", 0), "alone": p.stats.get("calls_alone", 0)}


def plain(gpus: int, batch: int) -> dict[str, object]:
    """The plain engine and the engine with shortcuts on one task graph."""
    r = compare_plain(f"ib-cluster:{gpus // 8}x8", GPT3, tp=(8, 1), pp=16, dp=gpus // 128,
                      micro_batch=1, global_batch=batch, vocab=51200)  # fmt: skip
    return {"gpus": gpus, "batch": batch, "tasks": r.tasks, "flows": r.flows, "events": r.events,
            "plain_s": r.plain_s, "events_per_s": r.events_per_s, "fast_s": r.fast_s,
            "agree": r.agree,
            "peak_rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}  # fmt: skip


def _run(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[1024, 4096, 16384])
    parser.add_argument("--cases", nargs="*", default=["isolated", "joint", "straggler"])
    parser.add_argument("--plain-gpus", type=int, default=1024)
    parser.add_argument("--plain-batch", type=int, default=128)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--plain-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return
    if args.plain_only:
        print(json.dumps(plain(args.plain_gpus, args.plain_batch)))
        return
    print(f"{'GPUs':>6} {'case':>10} {'wall s':>8} {'peak RSS GB':>12} {'iteration s':>12} "
          f"{'exposed DP s':>13} {'episodes':>9} {'calls alone':>12}")  # fmt: skip
    for gpus in args.gpus:
        for case in args.cases:
            r = _run("--one", str(gpus), case)
            print(f"{r['gpus']:>6} {r['case']:>10} {r['wall_s']:>8.1f} {r['peak_rss_GB']:>12.2f} "
                  f"{r['iteration_s']:>12.4f} {r['exposed_dp_s']:>13.4f} {r['episodes']:>9} "
                  f"{r['alone']:>12}", flush=True)  # fmt: skip
    r = _run("--plain-only", "--plain-gpus", str(args.plain_gpus), "--plain-batch", str(args.plain_batch))
    print(f"\nplain joint engine, {r['gpus']} GPUs, global batch {r['batch']}: {r['tasks']} tasks, "
          f"{r['flows']} flows, {r['events']} rate solves in {r['plain_s']:.1f} s = "
          f"{r['events_per_s']:.0f} events/s (peak RSS {r['peak_rss_GB']:.2f} GB); with its "
          f"shortcuts {r['fast_s']:.2f} s, same task ends: {r['agree']}")  # fmt: skip


if __name__ == "__main__":
    main()
