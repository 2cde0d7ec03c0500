"""The machine description, and what a measured machine contributes beyond the GEMM fit.

The GEMM fit (:mod:`atpsim.calibrate.fit.profile`) gives the peak, the per-call overhead and
the efficiency curve. The memory-bound ops of a layer also need a memory bandwidth, and a
profile carries a memory capacity; they come, in this order of preference, from:

1. the machine description (keys ``memory_bandwidth_Bps``, read as measured and so achievable
   in full unless ``memory_efficiency`` says otherwise, and ``memory_capacity_bytes``);
2. for a GPU whose name matches a bundled profile (A100, H100), that profile's datasheet
   figures and ``memory_efficiency``;
3. for a CPU (a gloo run: the "GPU" is one process on one core), :data:`CPU_MEMORY_BANDWIDTH_Bps`
   with :data:`CPU_MEMORY_EFFICIENCY`, and the host's memory divided by the rank count.

A CPU process on one core streams far less than its socket's DRAM bandwidth, and the tiny
layers of a CPU validation run mostly out of cache; what their memory-bound ops cost is mostly
the per-op dispatch overhead the GEMM fit measures, so this figure matters little there.

On a CPU the description also says how the busy ranks share the cores (:func:`cpu_share`,
:func:`slowed`) and whether a rank's communication can run beside its compute
(:func:`comm_overlaps_compute`); the comparison (:mod:`atpsim.calibrate.compare`) applies both.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from atpsim.compute.hardware import HardwareProfile, load_profile

#: One DDR4-3200 channel: 3200 MT/s x 8 bytes = 25.6 GB/s (JEDEC JESD79-4 data rates).
CPU_MEMORY_BANDWIDTH_Bps = 25.6e9
#: Assumed share of that channel one core streams: an assumption, not a measurement.
CPU_MEMORY_EFFICIENCY = 0.5
#: Placeholder capacity when the description gives none (not used by the timing model).
DEFAULT_CAPACITY_BYTES = 8 * 2**30
_GPU_PROFILES = {"a100": "a100-sxm4-80gb", "h100": "h100-sxm", "h200": "h200"}


def describe(machine: dict[str, Any]) -> str:
    """One line naming the machine from its description (device, count, backend)."""
    parts = [
        str(machine[key])
        for key in ("name", "device", "gpu", "gpu_name", "cpu", "cpu_model", "backend")
        if machine.get(key)
    ]
    gpus = machine.get("gpu_models")
    if isinstance(gpus, list) and gpus:
        parts.append(f"{len(gpus)} x {gpus[0]}")
    return ", ".join(dict.fromkeys(parts)) or "unnamed machine"


def base_profile(name: str, machine: dict[str, Any], n_ranks: int) -> HardwareProfile:
    """The profile the GEMM fit starts from: *name*, the description and memory figures."""
    sources = {"fit": "atpsim.calibrate.fit.profile on this folder's GEMM measurements"}
    gpu = _bundled_gpu(machine)
    if gpu is not None:
        # the bundled profile's provenance is not this fit's: the fitted file states none
        profile = replace(load_profile(gpu), name=name, description=describe(machine), provenance=())
        sources["memory_bandwidth_Bps"] = f"bundled profile {gpu} (datasheet)"
    else:
        capacity = float(machine.get("memory_total_bytes") or DEFAULT_CAPACITY_BYTES * n_ranks)
        profile = HardwareProfile(
            name=name,
            description=describe(machine),
            peak_flops=(("fp32", 1.0),),
            memory_bandwidth_Bps=CPU_MEMORY_BANDWIDTH_Bps,
            memory_capacity_bytes=capacity / max(n_ranks, 1),
            memory_efficiency=CPU_MEMORY_EFFICIENCY,
            launch_overhead_s=0.0,
        )
        sources["memory_bandwidth_Bps"] = (
            "one DDR4-3200 channel, 25.6 GB/s (JEDEC JESD79-4); efficiency 0.5 assumed for one core"
        )
    if machine.get("memory_bandwidth_Bps"):
        profile = replace(
            profile,
            memory_bandwidth_Bps=float(machine["memory_bandwidth_Bps"]),
            memory_efficiency=float(machine.get("memory_efficiency", 1.0)),
        )
        sources["memory_bandwidth_Bps"] = "machine description (a measured, achievable figure)"
    if machine.get("memory_capacity_bytes"):
        profile = replace(profile, memory_capacity_bytes=float(machine["memory_capacity_bytes"]))
    return replace(profile, sources=tuple(sorted(sources.items())))


#: Keys of a machine description that name its device (a command or a path may name anything).
DEVICE_KEYS = ("gpu_models", "gpu", "gpu_name", "device", "name")


def _bundled_gpu(machine: dict[str, Any]) -> str | None:
    values = [
        v
        for key in DEVICE_KEYS
        for value in [machine.get(key)]
        for v in (value if isinstance(value, list) else [value])
    ]
    text = " ".join(str(v) for v in values if isinstance(v, str)).lower()
    for key, profile in _GPU_PROFILES.items():
        if key in text:
            return profile
    return None


#: Keys a machine description may give the host's core count under (first found wins).
CORE_KEYS = ("cpu_cores", "cores", "cpu_count", "num_cpus", "logical_cpus", "nproc")
#: Keys for the threads each rank's PyTorch uses (OMP_NUM_THREADS; default 1).
THREAD_KEYS = ("threads_per_rank", "torch_threads", "num_threads", "omp_num_threads")


def is_cpu(machine: dict[str, Any]) -> bool:
    """True when the description is of a CPU run (gloo, no GPU named)."""
    device = str(machine.get("device", machine.get("device_type", ""))).lower()
    backend = str(machine.get("backend", "")).lower()
    return device.startswith("cpu") or (backend == "gloo" and _bundled_gpu(machine) is None)


def cpu_share(machine: dict[str, Any], n_ranks: int) -> float:
    """The share of one core each of *n_ranks* busy ranks gets: ``min(1, C / (P · T))`` with
    C cores and T threads per rank (1 when the description names no cores, or on a GPU).

    The GEMM benchmark runs one process alone; a layer runs P processes that compute at the
    same time (SPMD), so on C < P·T cores each runs at C/(P·T) of its solo speed. Everything a
    CPU rank computes (GEMM, memory-bound op, dispatch) is CPU work and slows alike."""
    if not is_cpu(machine):
        return 1.0
    cores = _first_number(machine, CORE_KEYS)
    threads = _first_number(machine, THREAD_KEYS) or 1.0
    if not cores:
        return 1.0
    return min(1.0, cores / (n_ranks * threads))


def _first_number(machine: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = machine.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def slowed(profile: HardwareProfile, share: float) -> HardwareProfile:
    """*profile* running at *share* of its speed: every compute duration divided by *share*
    (peak, memory bandwidth and measured GEMM rates times it, per-call overhead over it)."""
    if share >= 1.0:
        return profile
    gemm = replace(
        profile.gemm, points=tuple((m, n, k, r * share) for m, n, k, r in profile.gemm.points)
    )
    return replace(
        profile,
        peak_flops=tuple((d, p * share) for d, p in profile.peak_flops),
        memory_bandwidth_Bps=profile.memory_bandwidth_Bps * share,
        launch_overhead_s=profile.launch_overhead_s / share,
        gemm=gemm,
    )


def comm_overlaps_compute(machine: dict[str, Any], n_ranks: int) -> bool:
    """Whether a rank's collectives can run beside its compute (True on GPUs).

    On a CPU a collective is CPU work too: gloo's copies, reductions and socket calls run on a
    thread of the rank's process. Only when the host has a spare core for each rank
    (``C >= P · (T + 1)``) does that thread run beside the compute; otherwise the two take
    turns on the same cores, and a rank's step is its compute plus its communication."""
    if not is_cpu(machine):
        return True
    cores = _first_number(machine, CORE_KEYS)
    threads = _first_number(machine, THREAD_KEYS) or 1.0
    return cores is None or cores >= n_ranks * (threads + 1)
