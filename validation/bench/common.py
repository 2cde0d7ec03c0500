"""Shared pieces of the benchmarks: process group from torchrun's environment, timing,
statistics over repetitions, CSV output.

Timing: CUDA events on a GPU (elapsed time of the work queued between two events), else
``time.perf_counter`` around the call. Before each repetition every rank waits at a barrier,
so collectives on all groups start together; a repetition's time is that of the slowest rank.

On a shared CPU host other programs take cores from the benchmark. Linux counts, per thread,
the time it was runnable but waiting for a CPU (``/proc/thread-self/schedstat``, second
field); each repetition records that run-queue delay of the computing thread (the largest
over ranks), and every CSV gives it for the fastest repetition (``run_delay_s_fastest``) and
as a median, so a reader can tell a disturbed time from a clean one.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger("validation.bench")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30}


def parse_bytes(text: str) -> int:
    """``"64K"`` -> 65536: a byte count with an optional K, M or G (powers of 2, as nccl-tests)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = _SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in _SUFFIXES else text
    try:
        value = int(float(digits) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a size like 4096, 64K or 16M, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be >= 1 byte, got {text!r}")
    return value


def int_list(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}"
        ) from None


def mesh_list(text: str) -> list[tuple[int, int]]:
    """``"4x1,2x2"`` -> [(4, 1), (2, 2)]."""
    meshes = []
    for part in text.split(","):
        d1, sep, d2 = part.strip().lower().partition("x")
        if not sep or not d1.isdigit() or not d2.isdigit():
            raise argparse.ArgumentTypeError(f"expected meshes like 4x1,2x2, got {part!r}")
        meshes.append((int(d1), int(d2)))
    return meshes


def base_parser(description: str, dtypes: Sequence[str] = tuple(DTYPES)) -> argparse.ArgumentParser:
    """Options every benchmark has: output folder, dtype (one of *dtypes*), warm-up and
    repetitions."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for <name>.csv and <name>.machine.json"
    )
    parser.add_argument("--dtype", choices=sorted(dtypes), default="fp32")
    parser.add_argument("--warmup", type=int, default=5, help="untimed repetitions first")
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions")
    parser.add_argument(
        "--append", action="store_true",
        help="add the rows to an existing <name>.csv: repetitions of the same configurations "
        "from another run, which atpsim reduces with the others by the chosen statistic",
    )  # fmt: skip
    return parser


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The layer whose shapes are measured: hidden size, heads, batch, sequence, FFN multiple,
    dropout probability, and the chunk counts to try."""
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--ffn-mult", type=int, default=4)
    parser.add_argument("--chunks", type=int_list, default=[1, 2])
    parser.add_argument(
        "--dropout", type=float, default=0.1,
        help="attention and hidden dropout, as atpsim models (Megatron-LM's default 0.1)",
    )  # fmt: skip


def init_distributed() -> torch.device:
    """Join the process group torchrun describes (NCCL on GPUs, else gloo); a plain
    ``python -m`` run becomes a world of one. Returns this rank's device."""
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if "RANK" in os.environ:
            dist.init_process_group(backend)
        else:
            store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
            dist.init_process_group(backend, store=store, rank=0, world_size=1)
    if torch.cuda.is_available():
        torch.cuda.set_device(
            int(os.environ.get("LOCAL_RANK", dist.get_rank())) % torch.cuda.device_count()
        )
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def command_line(name: str, argv: Sequence[str] | None = None) -> str:
    """How this benchmark was started (*argv* defaults to ``sys.argv[1:]``)."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    per_node = os.environ.get("LOCAL_WORLD_SIZE", str(world))
    launcher = f"torchrun --nproc-per-node {per_node}" if world > 1 else "python"
    return " ".join(
        [launcher, "-m", f"validation.bench.{name}", *(sys.argv[1:] if argv is None else argv)]
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: GPU cycles of the spin queued before an op's start event (torch.cuda._sleep): 2e6 cycles
#: are about 1 ms at the H100's 1.98 GHz boost clock, longer than Python and cuBLAS take to
#: enqueue one op's kernels.
LAUNCH_COVER_CYCLES = 2_000_000


def keep_gpu_busy(device: torch.device) -> None:
    """On a GPU, queue a spin kernel that runs while the host enqueues the timed op, so the op
    starts right after its start event, as it does inside a layer whose host runs ahead of
    the GPU; its time is then the GPU's alone. Timed from an idle GPU, a 1 ms GEMM on an H100
    measured 38 us of host launch latency per call (the first run of
    ``validation/measurements/h100-sxm-1gpu``). A collective keeps that latency (its ranks
    must start together: the barrier), and so does the CPU, where there is nothing to hide."""
    if device.type == "cuda":
        torch.cuda._sleep(LAUNCH_COVER_CYCLES)


def time_once(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds *fn* takes: CUDA events on a GPU, perf_counter on the CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    begin = time.perf_counter()
    fn()
    return time.perf_counter() - begin


def run_delay_s() -> float:
    """Seconds the calling thread (the one that computes: OMP_NUM_THREADS=1 on a CPU) has
    spent runnable but waiting for a CPU (Linux schedstat); 0.0 where the kernel does not
    report it."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def time_reps(fn: Callable[[], Any], device: torch.device, warmup: int, reps: int,
              barrier: bool = True, delays: list[float] | None = None,
              prepare: Callable[[], Any] | None = None) -> list[float]:  # fmt: skip
    """Seconds of each of *reps* calls of *fn* after *warmup* untimed ones; with *barrier*,
    all ranks start each call together and each time is the slowest rank's. *delays*, when
    given, receives each call's run-queue delay (the largest over ranks with *barrier*);
    *prepare*, when given, runs untimed before each call (e.g. a cache flush). Without a
    barrier (one process timing an op), a GPU call is timed behind :func:`keep_gpu_busy`:
    the GPU's time alone, without the host's launch latency."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times, waits = [], []
    for _ in range(reps):
        if barrier:
            dist.barrier()
        synchronize(device)
        if prepare is not None:
            prepare()
        if not barrier:
            keep_gpu_busy(device)
        before = run_delay_s()
        times.append(time_once(fn, device))
        waits.append(run_delay_s() - before)
    if delays is not None:
        delays.extend(slowest_rank(waits, device) if barrier else waits)
    return slowest_rank(times, device) if barrier else times


def slowest_rank(times: Sequence[float], device: torch.device) -> list[float]:
    """Per repetition, the largest time over all ranks."""
    tensor = torch.tensor(list(times), dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def time_stats(times: Sequence[float], base: str = "time_s") -> dict[str, float]:
    """``{base: median, base_mean, base_min, base_max, base_std}`` in seconds."""
    return {
        base: statistics.median(times),
        f"{base}_mean": statistics.fmean(times),
        f"{base}_min": min(times),
        f"{base}_max": max(times),
        f"{base}_std": statistics.pstdev(times),
    }


def delay_columns(base: str = "time_s") -> tuple[str, str]:
    """The run-delay columns beside time column *base*: ``run_delay_s_fastest``,
    ``run_delay_s_median`` (``fwd_bwd_time_s`` -> ``fwd_bwd_run_delay_s_...``)."""
    prefix = base.removesuffix("time_s")
    return f"{prefix}run_delay_s_fastest", f"{prefix}run_delay_s_median"


def add_flush_option(parser: argparse.ArgumentParser) -> None:
    """``--flush BYTES``: write that many bytes before each repetition (untimed), so the op
    starts from caches holding other data, as it does inside a layer; 0: caches stay warm."""
    parser.add_argument(
        "--flush", type=parse_bytes_or_zero, default=0,
        help="bytes written before each repetition to evict the caches, e.g. 64M (0: none)",
    )  # fmt: skip


def parse_bytes_or_zero(text: str) -> int:
    """:func:`parse_bytes`, or 0 for ``"0"``."""
    return 0 if text.strip() == "0" else parse_bytes(text)


def cache_flusher(nbytes: int, device: torch.device) -> Callable[[], Any] | None:
    """A call that writes *nbytes* on *device* (None for 0): run before a repetition, it
    leaves the caches holding that buffer instead of the op's operands."""
    if nbytes <= 0:
        return None
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return lambda: buffer.fill_(1)


def timed(fn: Callable[[], Any], device: torch.device, args: Any, base: str = "time_s",
          barrier: bool = True) -> dict[str, float]:  # fmt: skip
    """:func:`time_stats` of *fn* (``args.warmup``, ``args.reps``; after the cache flush of
    ``args.flush`` bytes when the benchmark has that option) plus the run-queue delay of the
    fastest repetition and the median delay (:func:`delay_columns`)."""
    delays: list[float] = []
    prepare = cache_flusher(getattr(args, "flush", 0), device)
    times = time_reps(fn, device, args.warmup, args.reps, barrier, delays, prepare)
    fastest, median = delay_columns(base)
    at_min = delays[min(range(len(times)), key=times.__getitem__)]
    return time_stats(times, base) | {fastest: at_min, median: statistics.median(delays)}


def save(out: Path, name: str, columns: Sequence[str], rows: Sequence[dict[str, Any]],
         argv: Sequence[str] | None = None, append: bool = False) -> None:  # fmt: skip
    """On rank 0, write ``<name>.csv`` and ``<name>.machine.json`` (with the command line,
    *argv* being its arguments) into *out*, or with *append* add to them; then leave the
    process group."""
    from validation.bench.machine import write_machine

    if dist.get_rank() == 0:
        write_csv(out / f"{name}.csv", columns, rows, append)
        write_machine(out / f"{name}.machine.json", append, command=command_line(name, argv))
    dist.destroy_process_group()


def _cell(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else value


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]],
              append: bool = False) -> None:  # fmt: skip
    """Write *rows* with exactly *columns*, floats to 6 significant digits; with *append*,
    after the rows of an existing file with the same header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    append = append and path.is_file()
    if append:
        with path.open(newline="") as existing:
            header = next(csv.reader(existing), [])
        if header != list(columns):
            raise SystemExit(f"--append: {path} has columns {header}, expected {list(columns)}")
    with path.open("a" if append else "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="raise")
        if not append:
            writer.writeheader()
        writer.writerows({key: _cell(row[key]) for key in columns} for row in rows)
    log.info("%s %s (%d rows)", "appended to" if append else "wrote", path, len(rows))
