"""Time whole training iterations of GPT-3 175B with simulate_job, as issue 12 asks.

    python bench/bench_job.py               # 1024, 4096 and 16384 GPUs
    python bench/bench_job.py --gpus 4096

GPT-3 175B (Brown et al., 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context
2048; vocabulary 50,257 padded to 51,200) with TP 8 (one DGX A100 node), PP 16, 1F1B,
micro-batch 1, global batch 1536, on an InfiniBand fat tree of 8-GPU nodes
(``ib-cluster:Nx8``); DP fills the rest. Prints the wall time, the peak resident memory of
this process (each size in its own process) and the prediction.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from atpsim.api import ModelConfig, simulate_job

GPT3 = ModelConfig("gpt3-175b", hidden=12288, heads=96, layers=96, batch=1, seq=2048)


def one(gpus: int) -> dict[str, float]:
    dp = gpus // (8 * 16)
    start = time.perf_counter()
    p = simulate_job(f"ib-cluster:{gpus // 8}x8", GPT3, tp=(8, 1), pp=16, dp=dp, micro_batch=1,
                     global_batch=1536, vocab=51200)  # fmt: skip
    wall = time.perf_counter() - start
    return {"gpus": gpus, "dp": dp, "wall_s": wall,
            "peak_rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
            "iteration_s": p.iteration_time_s, "tflops_per_gpu": p.tflops_per_gpu, "mfu": p.mfu,
            "bubble_s": p.pipeline_bubble_s, "exposed_dp_s": p.exposed_dp_comm_s}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[1024, 4096, 16384])
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(one(args.gpus[0])))
        return
    print(f"{'GPUs':>6} {'DP':>4} {'wall s':>7} {'peak RSS GB':>12} {'iteration s':>12} "
          f"{'TFLOP/s/GPU':>12} {'MFU':>6} {'bubble s':>9} {'exposed DP s':>13}")  # fmt: skip
    for gpus in args.gpus:
        out = subprocess.run([sys.executable, __file__, "--json", "--gpus", str(gpus)],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        r = json.loads(out)
        print(f"{r['gpus']:>6} {r['dp']:>4} {r['wall_s']:>7.1f} {r['peak_rss_GB']:>12.2f} "
              f"{r['iteration_s']:>12.3f} {r['tflops_per_gpu']:>12.1f} {r['mfu']:>6.1%} "
              f"{r['bubble_s']:>9.3f} {r['exposed_dp_s']:>13.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
