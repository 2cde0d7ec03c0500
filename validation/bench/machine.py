"""The machine description written beside every benchmark CSV (``<name>.machine.json``).

CPU model and count, GPU model and count, torch / CUDA / NCCL / driver versions, the process
group (backend, world size), the host's load average when the benchmark ended and, where
``nvidia-smi`` exists, its ``topo -m`` matrix, so a fit knows what the numbers were measured
on.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_smi(*args: str) -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _gpus() -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"gpu_count": 0}
    count = torch.cuda.device_count()
    nccl = torch.cuda.nccl.version() if dist.is_nccl_available() else None
    driver = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    return {
        "gpu_count": count,
        "gpu_models": [torch.cuda.get_device_name(i) for i in range(count)],
        "cuda_version": torch.version.cuda,
        "nccl_version": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        "driver_version": driver.splitlines()[0] if driver else None,
        "nvidia_smi_topo": _nvidia_smi("topo", "-m"),
    }


def _load_average() -> list[float] | None:
    """The host's 1, 5 and 15 minute load averages (runnable tasks; a shared host shows
    other programs here), None where the OS does not say."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def describe_machine() -> dict[str, Any]:
    """What this process runs on, and the process group it belongs to (if any)."""
    description: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "omp_num_threads": torch.get_num_threads(),
        "load_average": _load_average(),
    }
    if dist.is_initialized():
        description |= {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
    return description | _gpus()


def write_machine(path: Path, append: bool = False, **extra: Any) -> None:
    """Write :func:`describe_machine` (plus *extra* keys, e.g. the command line) as JSON; with
    *append*, keep the earlier runs' command lines and load averages under ``runs``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    description = describe_machine() | extra
    run = {key: description.get(key) for key in ("command", "load_average")}
    runs = [run]
    if append and path.is_file():
        earlier = json.loads(path.read_text())
        runs = earlier.get("runs") or [{key: earlier.get(key) for key in run}]
        runs = [*runs, run]
    description["runs"] = runs
    path.write_text(json.dumps(description, indent=2, sort_keys=True) + "\n")
