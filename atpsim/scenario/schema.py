"""The scenario file's schema: typed, frozen, unknown keys rejected with the nearest valid one.

A scenario names what to simulate; every list-valued field is a sweep axis (see
:mod:`atpsim.scenario.sweep`). A field that takes "one or a list" accepts a single value as
a list of one. The YAML form::

    name: fig12                  # optional; default: the file's stem
    description: "..."           # optional
    topology: ic5                # preset | builder spec "torus:8x8" | custom file "net.yaml" |
                                 #   {preset: ic5, gpus: 256} | {builder: torus, dims: [4, 4],
                                 #   link_bandwidth: "25 GB/s", link_latency: "1 us"} |
                                 #   {file: net.yaml} | a list of these; a mapping
                                 #   may add `label: name` (its name in tables)
    hardware: a100-sxm4-80gb     # optional (or a list, or a profile file); default: the
                                 #   topology's meta["hardware"], else a100-sxm4-80gb
    model: M2                    # M1..M4, gpt3-*, megatron-*, llama3.1-*, mixtral-8x7b |
                                 #   {preset?, name?, hidden, heads, layers, batch, seq, dtype
                                 #   (fp16 | bf16 | fp32 | fp8), ffn_mult, kv_heads, ffn_hidden,
                                 #   ffn (gelu | swiglu), tie_embeddings, vocab, experts, top_k,
                                 #   moe_every, expert_ffn_hidden, capacity_factor} (a preset
                                 #   plus overrides; atpsim.compute.models.ModelConfig) |
                                 #   {hf_config: path/config.json, ...} (a Hugging Face
                                 #   config's shape, as `atpsim import hf` reads it; keys
                                 #   beside it override) | a list
    parallelism:                 # (a whole training job instead: tp, pp, dp, global_batch...,
                                 #   atpsim.scenario.parallelism)
      devices: 8                 # int or list; default: the topology's GPU count
      meshes: all                # all | atp-opt | list of [d1, d2], "d1xd2", "atp-i", "atp-opt"
      placement: row-major       # or a list (atpsim.parallel.mesh.placement_names())
    chunks: [1, 2, 4]            # int or list; each must divide model.batch
    algorithm: auto              # or a list: NCCL's choice (auto), ring, tree, ... (the
                                 #   all-reduce names of atpsim.engine.nccl)
    mode: des                    # des | analytic | [des, analytic]
    calibration:                 # optional, analytic mode: B1/B2 per mesh "d1xd2", either for
      "2x4": {B1: "1.20 GB/s", B2: "4.95 GB/s"}   # every topology or nested under a
      ic1: {"8x1": {B1: "0.97 GB/s"}}             # topology label
    cases:                       # optional: the sweep is the union of one product per case;
      - {topology: [ic1, ic2], parallelism: {devices: 8}}   # a case's keys (the axes above)
      - {topology: ic4, parallelism: {devices: 16}}         #   replace the scenario's
    reference: {table3: {...}}   # optional: published numbers for the report
    report: {...}                # optional: figures and options of the report
                                 #   (both typed in atpsim.scenario.report)
    output: {formats: [csv, parquet]}
    uncertainty: {draws: 32, seed: 0}   # optional: N draws of the fitted parameters, p10/p50/p90
                                 #   columns (atpsim.api.uncertainty; a job's: iteration time)

Relative ``file:`` paths (topology, hardware profile) resolve against the scenario file's
folder (the validation context's ``base_dir``). Errors are raised as pydantic errors of type
``"scenario"`` whose context carries the *subkey* below the failing field; the loader turns
them into one-line :class:`atpsim.errors.ScenarioError` messages with the full key path.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from atpsim.compute.hardware import DEFAULT_HARDWARE
from atpsim.errors import did_you_mean
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.entries import MeshChoice, ModelEntry, TopologyEntry
from atpsim.scenario.fields import (
    MESH_SIZE,
    OUTPUT_FORMATS,
    Algorithm,
    Frozen,
    Hardware,
    KeyPath,
    Mode,
    OneOrMore,
    OutputFormat,
    PositiveInt,
    Str,
    check_bandwidth,
    invalid,
    render_key,
    show,
)
from atpsim.scenario.parallelism import Parallelism
from atpsim.scenario.report import Reference, ReportField, ReportOptions
from atpsim.scenario.workload import JOB, Workload

__all__ = [
    "DEFAULT_HARDWARE",
    "Case",
    "MeshChoice",
    "ModelEntry",
    "Output",
    "Parallelism",
    "Reference",
    "ReportOptions",
    "Scenario",
    "TopologyEntry",
    "render_key",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _calibration(value: Any) -> dict[str, dict[str, dict[str, float]]]:
    """``{"2x4": {B1, B2}}`` (every topology) or ``{label: {"2x4": {B1, B2}}}`` as
    ``{label or "*": {"2x4": {"B1_Bps": ..., "B2_Bps": ...}}}``."""
    if not isinstance(value, dict):
        raise invalid(f"expected a mapping of meshes 'D1xD2' to {{B1, B2}}, got {show(value)}")
    result: dict[str, dict[str, dict[str, float]]] = {}
    for key, item in value.items():
        key = str(key)
        if MESH_SIZE.match(key):
            result.setdefault("*", {})[key] = _calibration_entry(item, (key,))
        elif isinstance(item, dict):
            result[key] = {str(m): _calibration_entry(b, (key, str(m))) for m, b in item.items()}
            for mesh in item:
                if not MESH_SIZE.match(str(mesh)):
                    raise invalid(
                        f"expected a mesh 'D1xD2' such as '2x4', got {show(mesh)}", (key, str(mesh))
                    )
        else:
            raise invalid(f"expected a mesh 'D1xD2' or a topology label, got {show(key)}", (key,))
    return result


def _calibration_entry(value: Any, path: KeyPath) -> dict[str, float]:
    if not isinstance(value, dict) or not value:
        raise invalid(
            f"expected a mapping {{B1: bandwidth, B2: bandwidth}}, got {show(value)}", path
        )
    entry = {}
    for key, bandwidth in value.items():
        if key not in ("B1", "B2"):
            raise invalid(
                f"unknown key {str(key)!r}{did_you_mean(key, ['B1', 'B2'])}", (*path, str(key))
            )
        entry[f"{key}_Bps"] = check_bandwidth(bandwidth, (*path, key))
    return entry


class Output(Frozen):
    """What the runner writes besides the report."""

    formats: OneOrMore[OutputFormat] = OUTPUT_FORMATS


class Uncertainty(Frozen):
    """``uncertainty: {draws: N, seed: S}``: simulate every point under N seeded draws of its
    fitted parameters (the same draws for every point) and add percentile columns
    (:mod:`atpsim.api.uncertainty`); about N + 1 times the cost of the sweep."""

    draws: Annotated[int, Field(strict=True, ge=1, le=1_000)]
    seed: Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)] = 0  # results: an int64 column


class Case(Frozen):
    """One part of a sweep made of several products: the keys it sets replace the
    scenario's (a whole key: a case's ``parallelism`` replaces the scenario's)."""

    topology: OneOrMore[TopologyEntry] | None = None
    hardware: OneOrMore[Hardware] | None = None
    model: OneOrMore[ModelEntry] | None = None
    parallelism: Parallelism | None = None
    chunks: OneOrMore[PositiveInt] | None = None
    algorithm: OneOrMore[Algorithm] | None = None
    mode: OneOrMore[Mode] | None = None


class Scenario(Frozen):
    """A validated scenario file. Build it with :func:`atpsim.scenario.loader.load_scenario`
    (which names the file in errors and resolves relative paths), expand it with
    :func:`atpsim.scenario.sweep.expand_sweep`.

    ``cases`` (optional) makes the sweep a union of products: each case is the scenario
    with the keys the case sets replaced (see :meth:`parts`); ``topology`` and ``model``
    are then required in each case or at the top level.
    """

    name: Str = "scenario"
    description: Str = ""
    topology: OneOrMore[TopologyEntry] | None = None
    hardware: OneOrMore[Hardware] | None = None
    model: OneOrMore[ModelEntry] | None = None
    parallelism: Parallelism = Parallelism()
    chunks: OneOrMore[PositiveInt] = (1,)
    algorithm: OneOrMore[Algorithm] = ("auto",)
    mode: OneOrMore[Mode] = ("des",)
    cases: Annotated[tuple[Case, ...], Field(min_length=1)] | None = None
    calibration: Annotated[
        dict[str, dict[str, dict[str, float]]], BeforeValidator(_calibration)
    ] = Field(default_factory=dict)
    reference: Reference | None = None
    report: ReportField = ReportOptions()
    output: Output = Output()
    uncertainty: Uncertainty | None = None

    _source: str | None = PrivateAttr(default=None)
    _raw: Any = PrivateAttr(default=None)
    _case: int | None = PrivateAttr(default=None)
    _case_keys: frozenset[str] = PrivateAttr(default=frozenset())

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise invalid(f"expected a name of letters, digits, '.', '_' or '-', got {value!r}")
        return value

    @model_validator(mode="after")
    def _check_required(self) -> Scenario:
        for key in ("topology", "model"):
            if not self.cases and getattr(self, key) is None:
                raise invalid("missing required key", (key,))
            for index, case in enumerate(self.cases or ()):
                value = getattr(case if key in case.model_fields_set else self, key)
                if value is None:
                    raise invalid(
                        "missing required key (set it here or at the top level)",
                        ("cases", index, key),
                    )
        return self

    @model_validator(mode="after")
    def _check_labels(self) -> Scenario:
        """Two different topologies with one label would give rows no table or figure can
        tell apart, so a label names one topology."""
        seen: dict[str, Any] = {}
        entries: list[tuple[tuple[str | int, ...], TopologyEntry]] = [(("topology", i), t) for i, t in enumerate(self.topologies)]
        for c, case in enumerate(self.cases or ()):
            if "topology" in case.model_fields_set:
                entries += [(("cases", c, "topology", i), t) for i, t in enumerate(case.topology or ())]
        for loc, entry in entries:
            label, spec = entry.label(), entry.spec_mapping()
            if label in seen and seen[label] != spec:
                raise invalid(
                    f"label {label!r} already names another topology; give each its own label",
                    loc,
                )
            seen.setdefault(label, spec)
        return self

    @model_validator(mode="after")
    def _check_job(self) -> Scenario:
        """A scenario sweeps one :attr:`workload` in every case; a job scenario is simulated
        (``des``) and reported by its own report, and takes no calibration."""
        workloads = [part.parallelism.workload for part in self.parts()]
        if len(set(workloads)) > 1:
            index = next(i for i, w in enumerate(workloads) if w != workloads[0]) if self.cases else 0
            raise invalid("expected every case to be a job (tp/pp/dp/global_batch) or none",
                          ("cases", index, "parallelism"))  # fmt: skip
        if workloads[0] != JOB:
            return self
        if any(mode != "des" for part in self.parts() for mode in part.mode):
            raise invalid("a job scenario is simulated (des); expected mode: des", ("mode",))
        if self.calibration:
            raise invalid("a job scenario takes no calibration (analytic mode only)",
                          ("calibration",))  # fmt: skip
        if self.report.figures is not None:
            raise invalid("a job scenario's report draws its own figures; remove 'figures'",
                          ("report", "figures"))  # fmt: skip
        return self

    @property
    def workload(self) -> Workload:
        """What this scenario sweeps (:mod:`atpsim.scenario.workload`): ``job`` where its
        parallelism has job keys (:mod:`atpsim.scenario.parallelism`: points are JobPoints,
        rows the job schema), else ``step``."""
        return self.parts()[0].parallelism.workload

    @property
    def source(self) -> str | None:
        """The file this scenario was loaded from (None when built in code)."""
        return self._source

    @property
    def topologies(self) -> tuple[TopologyEntry, ...]:
        return self.topology or ()

    @property
    def models(self) -> tuple[ModelEntry, ...]:
        return self.model or ()

    def parts(self) -> list[Scenario]:
        """The products this scenario's sweep is the union of: itself without ``cases``,
        else one scenario per case (whose :meth:`key_path` points into ``cases[i]``)."""
        if not self.cases:
            return [self]
        parts = []
        for index, case in enumerate(self.cases):
            update = {key: getattr(case, key) for key in case.model_fields_set}
            part = self.model_copy(update={**update, "cases": None})
            part._case, part._case_keys = index, frozenset(update)
            parts.append(part)
        return parts

    def key_path(self, *loc: str | int) -> str:
        """The key path of *loc* as the file wrote it (``chunks`` for a scalar, else
        ``chunks[1]``; ``cases[2].chunks`` where a case set it)."""
        if loc and loc[0] in self._case_keys:
            loc = ("cases", self._case or 0, *loc)
        return render_key(loc, self._raw)

    def calibration_for(self, label: str, mesh: DeviceMesh) -> dict[str, float] | None:
        """The calibrated bandwidths of *mesh* on topology *label*, if the scenario has any."""
        name = f"{mesh.d1}x{mesh.d2}"
        for scope in (label, "*"):
            if name in self.calibration.get(scope, {}):
                return dict(self.calibration[scope][name])
        return None
