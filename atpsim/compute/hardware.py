"""Hardware profiles: what one GPU can compute and move, as data (``atpsim/data/hardware/``).

A profile file is YAML with these keys (SI units; the key names carry them)::

    name: a100-sxm4-80gb
    description: NVIDIA A100-SXM4-80GB
    peak_flops: {fp16: 312.0e+12, bf16: 312.0e+12, fp32: 19.5e+12}   # dense FLOP/s per dtype
    memory_bandwidth_Bps: 2.039e+12       # HBM bandwidth, bytes/s
    memory_capacity_bytes: 85899345920    # device memory, bytes
    memory_efficiency: 0.8                # achievable fraction of the bandwidth, memory-bound ops
    launch_overhead_s: 4.0e-6             # fixed cost added to every kernel
    collective_overhead_s: 0.0            # optional: fixed cost added to every collective call
    layer_overhead_s: 0.0                 # optional: fixed time per transformer layer (see below)
    memory_efficiency_by_class:           # optional: memory_efficiency per memory-bound op class
      softmax: 0.7                        #   (atpsim.compute.timing.memory_op_class); others
      gelu_bwd: 0.5                       #   use memory_efficiency
    gemm:                                 # the GEMM efficiency model (atpsim.compute.gemm)
      model: curve
      efficiency_max: 0.845
      output_half_elements: 944000
      k_half: 128
      smoothness: 1.5
      correction_radius_octaves: 1.0
      points:                             # measured GEMMs: [m, n, k, flops_per_s] (dtype: fp16)
        - [1024, 1024, 1024, 119.4e+12]
    sources: {peak_flops: "...", ...}     # a citation for every number
    provenance: {status: fitted, summary: "..."}  # optional: the profile as a whole (below)

``gemm.model`` is ``curve`` (the fitted curve alone) or ``table`` (the curve corrected toward
the measured ``points``, see :mod:`atpsim.compute.gemm`); a fit that measured GEMMs can write
the points and the refitted curve parameters with :func:`profile_to_dict`. Numbers may be
written as YAML floats or as strings (``"312e12"``, which plain YAML would read as text).

``memory_efficiency_by_class`` refines ``memory_efficiency`` per class of memory-bound op
(``layernorm``, ``softmax``, ``gelu``, ``dropout``, ``bias_dropout_add``, ``optimizer``,
``elementwise``, each optionally with ``_bwd`` for its backward pass): a GPU's fused kernels
reach about the same fraction of bandwidth whatever they compute, but unfused eager ops or a
CPU core bound by ``exp``/``erf`` do not. A class missing from the mapping falls back to its
forward class, then to ``memory_efficiency``, so a profile without the key times every op as
before.

``provenance`` says in one word how the profile as a whole came to be, so every output can name
it (:mod:`atpsim.calibrate.provenance`): ``status`` one of :data:`PROVENANCE_STATUSES`
(``measured``: its numbers are measurements; ``fitted``: its decisive numbers, the GEMM curve,
are fitted to measurements; ``derived``: computed from another profile or fit; ``spec``:
datasheet values), and ``summary``, one sentence on which part is which. The per-number
citations stay in ``sources``.

``layer_overhead_s`` is a fixed time per transformer layer outside the modelled ops: the
framework's per-layer host work (Python dispatch, autograd bookkeeping, allocator calls that
the GPU waits on) plus the step's work outside the layers (embedding, loss, optimizer),
amortised per layer. It is 0 for spec-sheet profiles and fitted for calibrated software-stack
profiles (``a100-sxm4-80gb-paper-stack``, :mod:`atpsim.calibrate.paper`); the step adds
``layers · layer_overhead_s`` to compute and step time (:func:`atpsim.engine.step.run.
layer_overhead_s`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from atpsim.errors import AtpsimError, did_you_mean
from atpsim.topology.graph import Topology
from atpsim.yamlfile import file_digest

_GEMM_MODELS = ("curve", "table")

#: How a profile (or an NCCL profile, :mod:`atpsim.calibrate.provenance`) came to be: its
#: numbers measured, fitted to measurements, derived from another fit, or datasheet values.
PROVENANCE_STATUSES = ("measured", "fitted", "derived", "spec")
_PROVENANCE_KEYS = {"status", "summary"}

#: The hardware profile of a topology that names none.
DEFAULT_HARDWARE = "a100-sxm4-80gb"


@dataclass(frozen=True)
class GemmModel:
    """Parameters of the GEMM efficiency curve (see :func:`atpsim.compute.gemm.curve_efficiency`)
    and the measured points it is corrected toward. *points* are ``(m, n, k, flops_per_s)``
    measured for *points_dtype*."""

    model: str = "curve"
    efficiency_max: float = 0.8
    output_half_elements: float = 1.0e6
    k_half: float = 128.0
    smoothness: float = 1.5
    correction_radius_octaves: float = 1.0
    points: tuple[tuple[int, int, int, float], ...] = ()
    points_dtype: str = "fp16"


@dataclass(frozen=True)
class HardwareProfile:
    """One GPU: peak FLOP/s per dtype, memory bandwidth and capacity, the achievable fraction
    of bandwidth for memory-bound kernels, a fixed per-kernel launch overhead, the GEMM
    efficiency model, and a fixed per-collective overhead (*collective_overhead_s*: the host
    and library cost of one collective call, kernel launch and synchronisation, that moves no
    bytes; 0 by default, set by calibrated software-stack profiles and added to every
    collective by :mod:`atpsim.engine.step.run`), and optionally a memory efficiency per class of
    memory-bound op (*memory_efficiency_by_class*, see :meth:`memory_efficiency_for`), and a
    fixed time per transformer layer outside the modelled ops (*layer_overhead_s*, seconds,
    >= 0; 0 by default; see the module docstring), and how the profile came to be
    (*provenance*: ``(("status", ...), ("summary", ...))``, empty where the file says
    nothing; see the module docstring). Frozen and hashable, so timings can be memoized per
    profile."""

    name: str
    peak_flops: tuple[tuple[str, float], ...]
    memory_bandwidth_Bps: float
    memory_capacity_bytes: float
    memory_efficiency: float
    launch_overhead_s: float
    gemm: GemmModel = field(default_factory=GemmModel)
    collective_overhead_s: float = 0.0
    description: str = ""
    sources: tuple[tuple[str, str], ...] = ()
    memory_efficiency_by_class: tuple[tuple[str, float], ...] = ()
    layer_overhead_s: float = 0.0
    provenance: tuple[tuple[str, str], ...] = ()

    @property
    def provenance_status(self) -> str | None:
        """The profile's ``provenance.status`` (one of :data:`PROVENANCE_STATUSES`), None where
        its file states none."""
        return dict(self.provenance).get("status")

    def memory_efficiency_for(self, op_class: str | None = None) -> float:
        """The achievable fraction of memory bandwidth for memory-bound ops of *op_class*
        (e.g. ``"gelu_bwd"``): its own entry, else its forward class's (``"gelu"``), else
        :attr:`memory_efficiency`."""
        by_class = dict(self.memory_efficiency_by_class)
        if op_class is not None:
            for key in (op_class, op_class.removesuffix("_bwd")):
                if key in by_class:
                    return by_class[key]
        return self.memory_efficiency

    def peak_flops_for(self, dtype: str) -> float:
        """Dense peak FLOP/s for *dtype*, or an error naming the dtypes this profile knows."""
        peaks = dict(self.peak_flops)
        if dtype not in peaks:
            raise AtpsimError(
                f"hardware profile {self.name!r} has no peak FLOP/s for dtype {dtype!r}; "
                f"it knows {sorted(peaks)}"
            )
        return peaks[dtype]


def topology_hardware(topology: Topology, hardware: str | None = None) -> str:
    """The hardware profile a run on *topology* uses: *hardware* when the caller names one, else
    the topology's own (``meta["hardware"]``: a preset's, or the profile of the GPU generation a
    builder was given, :data:`atpsim.topology.builders.switch.GENERATION_HARDWARE`), else
    :data:`DEFAULT_HARDWARE`. Every entry point (plan, search, scenarios, collective, the API)
    asks this one function, so an H100 cluster computes as an H100 wherever it is run."""
    return hardware or str(topology.meta.get("hardware", DEFAULT_HARDWARE))


def profile_names() -> list[str]:
    """Names of the bundled profiles (file stems in ``atpsim/data/hardware``), sorted."""
    folder = resources.files("atpsim") / "data" / "hardware"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_profile(name_or_path: str | Path) -> HardwareProfile:
    """The bundled profile called *name_or_path*, or the profile in that YAML file."""
    text, source = _read_profile_text(str(name_or_path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AtpsimError(f"invalid YAML: {exc}", source=source) from exc
    try:
        return profile_from_dict(data)
    except AtpsimError as exc:
        raise exc.with_source(source) from None


def hardware_profile(name: str) -> HardwareProfile:
    """The hardware profile called *name* (a packaged profile or a YAML file), loaded once
    per process (:func:`load_profile`), as every point and job of a sweep asks for it; a
    file is loaded again once its bytes change (a rerun in the same process sees the edit)."""
    path = profile_file(name)
    return _cached_profile(name, file_digest(path) if path else None)


@lru_cache(maxsize=16)
def _cached_profile(name: str, _digest: str | None) -> HardwareProfile:
    return load_profile(name)


def profile_file(name_or_path: str) -> str | None:
    """*name_or_path* where it names a profile file (a ``.yaml``/``.yml`` path, or any path
    that exists), None where it names a bundled profile: the rule :func:`load_profile` reads
    by, so a sweep point keys exactly the files it reads."""
    path = Path(name_or_path)
    return name_or_path if path.suffix in (".yaml", ".yml") or path.exists() else None


def _read_profile_text(name_or_path: str) -> tuple[str, str]:
    if profile_file(name_or_path) is not None:
        path = Path(name_or_path)
        if not path.is_file():
            raise AtpsimError(f"hardware profile file {name_or_path!r} does not exist")
        return path.read_text(), str(path)
    names = profile_names()
    if name_or_path not in names:
        raise AtpsimError(
            f"unknown hardware profile {name_or_path!r}{did_you_mean(name_or_path, names)}"
        )
    resource = resources.files("atpsim") / "data" / "hardware" / f"{name_or_path}.yaml"
    return resource.read_text(), f"{name_or_path}.yaml"


_TOP_KEYS = {
    "name", "description", "peak_flops", "memory_bandwidth_Bps", "memory_capacity_bytes",
    "memory_efficiency", "launch_overhead_s", "collective_overhead_s", "gemm", "sources",
    "memory_efficiency_by_class", "layer_overhead_s", "provenance",
}  # fmt: skip
_GEMM_KEYS = {
    "model", "efficiency_max", "output_half_elements", "k_half", "smoothness",
    "correction_radius_octaves", "points", "points_dtype",
}  # fmt: skip


def profile_from_dict(data: Any) -> HardwareProfile:
    """Validate a parsed profile mapping (errors carry the key path) and build the profile."""
    table = _mapping(data, "")
    _check_keys(table, _TOP_KEYS, "")
    peaks = _mapping(table.get("peak_flops"), "peak_flops")
    if not peaks:
        raise AtpsimError("expected at least one dtype", key="peak_flops")
    return HardwareProfile(
        name=str(_required(table, "name")),
        description=str(table.get("description", "")),
        peak_flops=tuple(
            sorted((str(k), _positive(v, f"peak_flops.{k}")) for k, v in peaks.items())
        ),
        memory_bandwidth_Bps=_positive(
            _required(table, "memory_bandwidth_Bps"), "memory_bandwidth_Bps"
        ),
        memory_capacity_bytes=_positive(
            _required(table, "memory_capacity_bytes"), "memory_capacity_bytes"
        ),
        memory_efficiency=_fraction(table.get("memory_efficiency", 0.8), "memory_efficiency"),
        launch_overhead_s=_non_negative(table.get("launch_overhead_s", 0.0), "launch_overhead_s"),
        collective_overhead_s=_non_negative(
            table.get("collective_overhead_s", 0.0), "collective_overhead_s"
        ),
        gemm=_gemm_from_dict(table.get("gemm", {})),
        memory_efficiency_by_class=_efficiency_by_class(table.get("memory_efficiency_by_class")),
        layer_overhead_s=_non_negative(table.get("layer_overhead_s", 0.0), "layer_overhead_s"),
        provenance=_provenance(table.get("provenance")),
        sources=tuple(
            sorted(
                (str(k), str(v)) for k, v in _mapping(table.get("sources", {}), "sources").items()
            )
        ),
    )


def _gemm_from_dict(data: Any) -> GemmModel:
    table = _mapping(data, "gemm")
    _check_keys(table, _GEMM_KEYS, "gemm.")
    model = str(table.get("model", "curve"))
    if model not in _GEMM_MODELS:
        raise AtpsimError(f"expected one of {list(_GEMM_MODELS)}, got {model!r}", key="gemm.model")
    default = GemmModel()
    return GemmModel(
        model=model,
        efficiency_max=_fraction(
            table.get("efficiency_max", default.efficiency_max), "gemm.efficiency_max"
        ),
        output_half_elements=_non_negative(
            table.get("output_half_elements", default.output_half_elements),
            "gemm.output_half_elements",
        ),
        k_half=_non_negative(table.get("k_half", default.k_half), "gemm.k_half"),
        smoothness=_positive(table.get("smoothness", default.smoothness), "gemm.smoothness"),
        correction_radius_octaves=_positive(
            table.get("correction_radius_octaves", default.correction_radius_octaves),
            "gemm.correction_radius_octaves",
        ),
        points=tuple(
            _gemm_point(p, f"gemm.points[{i}]") for i, p in enumerate(table.get("points") or [])
        ),
        points_dtype=str(table.get("points_dtype", default.points_dtype)),
    )


def _efficiency_by_class(data: Any) -> tuple[tuple[str, float], ...]:
    """``{class: fraction}`` -> sorted pairs; each fraction in (0, 1]."""
    table = _mapping(data, "memory_efficiency_by_class")
    return tuple(
        sorted((str(k), _fraction(v, f"memory_efficiency_by_class.{k}")) for k, v in table.items())
    )


def _provenance(data: Any) -> tuple[tuple[str, str], ...]:
    """``{status, summary}`` -> sorted pairs; *status* one of :data:`PROVENANCE_STATUSES`."""
    table = _mapping(data, "provenance")
    if not table:
        return ()
    _check_keys(table, _PROVENANCE_KEYS, "provenance.")
    status = str(_required(table, "status", "provenance."))
    if status not in PROVENANCE_STATUSES:
        raise AtpsimError(f"expected one of {list(PROVENANCE_STATUSES)}, got {status!r}",
                          key="provenance.status")  # fmt: skip
    return tuple(sorted((str(k), str(v)) for k, v in table.items()))


def _gemm_point(value: Any, key: str) -> tuple[int, int, int, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise AtpsimError("expected [m, n, k, flops_per_s]", key=key)
    m, n, k = (int(_positive(v, key)) for v in value[:3])
    return m, n, k, _positive(value[3], key)


def profile_to_dict(profile: HardwareProfile) -> dict[str, Any]:
    """The YAML-ready mapping of *profile* (what :func:`profile_from_dict` reads back); the
    per-class memory efficiencies and the per-layer overhead only when the profile has them, so
    a profile without them writes the mapping it always did (its provenance likewise)."""
    gemm = profile.gemm
    return {
        "name": profile.name,
        "description": profile.description,
        "peak_flops": dict(profile.peak_flops),
        "memory_bandwidth_Bps": profile.memory_bandwidth_Bps,
        "memory_capacity_bytes": profile.memory_capacity_bytes,
        "memory_efficiency": profile.memory_efficiency,
        "launch_overhead_s": profile.launch_overhead_s,
        "collective_overhead_s": profile.collective_overhead_s,
        **_by_class(profile),
        **({"layer_overhead_s": profile.layer_overhead_s} if profile.layer_overhead_s else {}),
        "gemm": {
            "model": gemm.model,
            "efficiency_max": gemm.efficiency_max,
            "output_half_elements": gemm.output_half_elements,
            "k_half": gemm.k_half,
            "smoothness": gemm.smoothness,
            "correction_radius_octaves": gemm.correction_radius_octaves,
            "points_dtype": gemm.points_dtype,
            "points": [list(p) for p in gemm.points],
        },
        "sources": dict(profile.sources),
        **({"provenance": dict(profile.provenance)} if profile.provenance else {}),
    }


def _by_class(profile: HardwareProfile) -> dict[str, Any]:
    by_class = dict(profile.memory_efficiency_by_class)
    return {"memory_efficiency_by_class": by_class} if by_class else {}


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AtpsimError(f"expected a mapping, got {type(value).__name__}", key=key or None)
    return value


def _check_keys(table: dict[str, Any], allowed: set[str], prefix: str) -> None:
    for key in table:
        if key not in allowed:
            raise AtpsimError(f"unknown key{did_you_mean(key, allowed)}", key=f"{prefix}{key}")


def _required(table: dict[str, Any], key: str, prefix: str = "") -> Any:
    if key not in table:
        raise AtpsimError("missing required key", key=f"{prefix}{key}")
    return table[key]


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise AtpsimError(f"expected a number, got {value!r}", key=key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise AtpsimError(f"expected a number, got {value!r}", key=key) from None


def _positive(value: Any, key: str) -> float:
    number = _number(value, key)
    if not number > 0:
        raise AtpsimError(f"expected a positive number, got {value!r}", key=key)
    return number


def _non_negative(value: Any, key: str) -> float:
    number = _number(value, key)
    if number < 0:
        raise AtpsimError(f"expected a number >= 0, got {value!r}", key=key)
    return number


def _fraction(value: Any, key: str) -> float:
    number = _number(value, key)
    if not 0 < number <= 1:
        raise AtpsimError(f"expected a fraction in (0, 1], got {value!r}", key=key)
    return number
