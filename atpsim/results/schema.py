"""The one declared results schema: every column of a results table, its dtype and its unit,
for each workload a scenario simulates (:data:`SCHEMAS`, by name).

- ``step``: one training step of a tensor-parallel group per point (:data:`STEP_SCHEMA`).
  The first columns describe the point (filled by the sweep runner from
  :func:`atpsim.scenario.point.point_columns`, so a failed point still shows what it was); the
  rest are what :func:`atpsim.api.simulate_point` measured. ``comm_over_delta`` is the
  communication time in units of the paper's Delta = 2·L·b·s·h / GroupBW (Section 3.5,
  Figure 12), empty where no GroupBW is defined. A scenario with parameter draws adds the
  percentiles of :data:`UNCERTAINTY_COLUMNS` (:data:`STEP_UNCERTAINTY_SCHEMA`).
- ``job``: one whole training iteration of a data x pipeline x tensor-parallel layout per
  point (:data:`JOB_SCHEMA`, :func:`atpsim.training.job.run_job`). ``tp_scheme`` is
  ``megatron-1d`` for Megatron-LM's 1D tensor parallelism (DeviceMesh(t, 1)) and ``atp-2d``
  for an ATP mesh with d2 > 1 (the report compares the best of each). The times are those of
  the critical pipeline stage and add up: compute + exposed TP + exposed DP + bubble + other =
  iteration time. A layout whose busiest rank does not fit the GPU's memory is a row with
  ``fits_memory`` false and empty times: it is not simulated (as :func:`atpsim.api.plan_job`
  prunes it).

Units follow the house style: seconds, bytes, bytes/s; TFLOP/s in SI (10^12) and, for
comparisons with the paper, in its 2^40 unit. Everything that reads or writes a table
(:mod:`atpsim.results.io`, the sweep runner, the report) takes its column list, order and
dtypes from a :class:`ResultsSchema`, and tells the workloads apart by a table's columns
(:func:`workload_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from atpsim.errors import AtpsimError, did_you_mean

Dtype = Literal["string", "int", "float", "bool"]


@dataclass(frozen=True)
class Column:
    """One results column: *name*, *dtype* (string | int | float | bool), *unit* ("" when
    dimensionless) and a one-line *description*."""

    name: str
    dtype: Dtype
    unit: str
    description: str


def _col(name: str, dtype: Dtype, unit: str, description: str) -> Column:
    return Column(name, dtype, unit, description)


#: Every column, in table order. Add new columns here (and nowhere else).
COLUMNS: tuple[Column, ...] = (
    _col("scenario", "string", "", "scenario name"),
    _col("point_key", "string", "", "stable key of the sweep point (resume key)"),
    _col("topology", "string", "", "topology label (preset or builder spec)"),
    _col("n_devices", "int", "GPUs", "devices in the tensor-parallel group"),
    _col("model", "string", "", "model name (M1..M4 or the scenario's)"),
    _col("hidden", "int", "", "hidden size h"),
    _col("heads", "int", "", "attention heads"),
    _col("layers", "int", "", "transformer layers L"),
    _col("batch", "int", "", "micro-batch size b"),
    _col("seq", "int", "tokens", "sequence length s"),
    _col("dtype", "string", "", "tensor dtype"),
    _col("d1", "int", "GPUs", "mesh dimension 1 of DeviceMesh(d1, d2)"),
    _col("d2", "int", "GPUs", "mesh dimension 2 of DeviceMesh(d1, d2)"),
    _col("mesh", "string", "", "mesh as 'd1xd2'"),
    _col("atp_i", "int", "", "i of the paper's ATP-i naming: DeviceMesh(N/i, i), i.e. d2"),
    _col("chunks", "int", "", "batch chunks for compute/communication overlap"),
    _col("algorithm", "string", "", "collective algorithm"),
    _col("mode", "string", "", "des (event engine) or analytic (closed form)"),
    _col("step_time_s", "float", "s", "time of one training step (forward + backward)"),
    _col("compute_time_s", "float", "s", "compute time of one step on one rank"),
    _col("comm_time_s", "float", "s", "communication time of one step on one rank"),
    _col("exposed_comm_s", "float", "s", "communication not hidden behind compute"),
    _col("tflops_per_gpu", "float", "TFLOP/s (1e12)", "model FLOPs / step time / GPUs"),
    _col("tflops_per_gpu_paper_unit", "float", "TFLOP/s (2^40)", "as above in the paper's unit"),
    _col("comm_over_delta", "float", "Delta", "comm time / (2 L b s h / GroupBW); empty if none"),
    _col("group_bw_Bps", "float", "B/s", "GroupBW of the topology (empty where undefined)"),
    _col("memory_per_rank_bytes", "float", "B", "weights, gradients and activations per rank"),
    _col("fits_memory", "bool", "", "memory_per_rank_bytes fits the GPU memory"),
    _col("status", "string", "", "ok | failed"),
    _col("error", "string", "", "error message of a failed point"),
    _col("hardware", "string", "", "hardware profile of the GPUs"),
    _col("placement", "string", "", "placement of mesh positions on GPU ranks"),
    _col("mesh_group", "string", "", "group the mesh is a candidate of (atp-opt), if any"),
    _col("group_key", "string", "", "key shared by the candidates of one group (best = ATP-OPT)"),
    _col("point_index", "int", "", "index of the point in the expanded sweep (row order)"),
    _col("scheme", "string", "", "tensor parallelism: atp, summa (2D/2.5D; mesh 'qxq[xd]') or sagemaker (mesh 'tx1')"),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)

#: Columns that describe the point (:func:`atpsim.scenario.point.point_columns`); the rest
#: are results.
POINT_COLUMNS: tuple[str, ...] = (
    "scenario", "point_key", "topology", "n_devices", "model", "hidden", "heads", "layers",
    "batch", "seq", "dtype", "d1", "d2", "mesh", "atp_i", "chunks", "algorithm", "mode",
    "hardware", "placement", "mesh_group", "group_key", "point_index", "scheme",
)  # fmt: skip

STATUSES = ("ok", "failed")


@dataclass(frozen=True)
class ResultsSchema:
    """One kind of results table: its *columns* in order, the *point_columns* that describe a
    point (the rest are results), and the *describe* columns that name a point on one line in
    a log message. A sweep's points say which schema their rows follow."""

    name: str
    columns: tuple[Column, ...]
    point_columns: tuple[str, ...]
    describe: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def workload(self) -> str:
        """The workload whose points this table holds (:func:`workload_of` its columns)."""
        return workload_of(self.names)

    def column(self, name: str) -> Column:
        """The declared :class:`Column` called *name*."""
        by_name = {c.name: c for c in self.columns}
        if name not in by_name:
            raise ResultsError(f"unknown results column {name!r}{did_you_mean(name, by_name)}")
        return by_name[name]

    def normalize_row(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A complete row in schema order from *values*: missing columns become None, each
        value is coerced to its column's dtype, unknown columns raise :class:`ResultsError`."""
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            self.column(unknown[0])
        row = {c.name: _coerce(c, values.get(c.name)) for c in self.columns}
        if row["status"] is None:
            row["status"] = "ok"
        if row["status"] not in STATUSES:
            raise ResultsError(
                f"results column 'status' must be one of {STATUSES}, got {row['status']!r}"
            )
        return row

    def pandas_dtypes(self) -> dict[str, str]:
        """Column -> pandas dtype (nullable types, so a failed row's empty results stay NA)."""
        mapping = {"string": "string", "int": "Int64", "float": "float64", "bool": "boolean"}
        return {c.name: mapping[c.dtype] for c in self.columns}

    def describe_markdown(self) -> str:
        """The schema as a Markdown table (column, dtype, unit, description)."""
        lines = ["| column | dtype | unit | description |", "|---|---|---|---|"]
        lines += [f"| {c.name} | {c.dtype} | {c.unit} | {c.description} |" for c in self.columns]
        return "\n".join(lines)


#: The table of one training step per point (every scenario without job keys).
STEP_SCHEMA = ResultsSchema(
    "step", COLUMNS, POINT_COLUMNS,
    ("topology", "n_devices", "model", "mesh", "chunks", "algorithm", "mode"),
)  # fmt: skip


#: Every column of a job table (one whole training iteration per point), in table order.
JOB_COLUMNS: tuple[Column, ...] = (
    _col("scenario", "string", "", "scenario name"),
    _col("point_key", "string", "", "stable key of the sweep point (resume key)"),
    _col("topology", "string", "", "topology label (preset or builder spec)"),
    _col("hardware", "string", "", "hardware profile of the GPUs"),
    _col("model", "string", "", "model name (a preset or the scenario's)"),
    _col("hidden", "int", "", "hidden size h"),
    _col("heads", "int", "", "attention heads"),
    _col("layers", "int", "", "transformer layers L"),
    _col("seq", "int", "tokens", "sequence length s"),
    _col("vocab", "int", "tokens", "vocabulary (padded; 0: no embedding and LM head)"),
    _col("dtype", "string", "", "tensor dtype"),
    _col("n_devices", "int", "GPUs", "GPUs of the job (tp x pp x dp)"),
    _col("tp_scheme", "string", "", "megatron-1d (mesh t x 1) or atp-2d (d2 > 1)"),
    _col("d1", "int", "GPUs", "TP mesh dimension 1 of DeviceMesh(d1, d2)"),
    _col("d2", "int", "GPUs", "TP mesh dimension 2 of DeviceMesh(d1, d2)"),
    _col("tp_mesh", "string", "", "TP mesh as 'd1xd2'"),
    _col("tp", "int", "GPUs", "tensor-parallel degree d1 x d2"),
    _col("pp", "int", "", "pipeline stages"),
    _col("dp", "int", "", "data-parallel replicas"),
    _col("order", "string", "", "layout dimensions, innermost first (e.g. tp,pp,dp)"),
    _col("placement", "string", "", "placement of TP mesh positions on GPU ranks"),
    _col("micro_batch", "int", "samples", "samples per micro-batch"),
    _col("global_batch", "int", "samples", "samples per iteration"),
    _col("n_microbatches", "int", "", "micro-batches per replica per iteration"),
    _col("schedule", "string", "", "pipeline schedule (gpipe, 1f1b, interleaved-1f1b)"),
    _col("virtual_stages", "int", "", "model chunks per pipeline stage (interleaved)"),
    _col("chunks", "int", "", "chunks of a micro-batch for TP compute/communication overlap"),
    _col("algorithm", "string", "", "collective algorithm"),
    _col("sequence_parallel", "bool", "", "Megatron-LM sequence parallelism (1D TP only)"),
    _col("recompute", "string", "", "activation recomputation: none, selective or full"),
    _col("zero", "int", "", "ZeRO stage (0 or 1)"),
    _col("network", "string", "", "joint (calls in flight share links) or isolated (each alone)"),
    _col("perturb", "string", "", "slow GPUs and links (parallelism.perturb; none)"),
    _col("neighbour", "string", "", "a second job on the next GPUs of the fabric (none)"),
    _col("cp", "int", "", "context-parallel degree (1: none): GPUs each sequence is split over"),
    _col("ep", "int", "", "expert-parallel degree (1: none), carved out of the dp replicas"),
    _col("partition", "string", "", "layers per pipeline stage: even, or the counts a/b/..."),
    _col("offload_activations", "bool", "", "stored activations to host memory between forward and backward"),
    _col("iteration_time_s", "float", "s", "time of one training iteration"),
    _col("samples_per_s", "float", "samples/s", "global batch / iteration time"),
    _col("tflops_per_gpu", "float", "TFLOP/s (1e12)", "model FLOPs / iteration time / GPUs"),
    _col("hardware_tflops_per_gpu", "float", "TFLOP/s (1e12)", "as above, recomputation counted"),
    _col("mfu", "float", "", "model FLOPs utilization: tflops_per_gpu / peak"),
    _col("compute_s", "float", "s", "compute on the critical stage"),
    _col("exposed_tp_comm_s", "float", "s", "TP communication not hidden behind compute"),
    _col("exposed_dp_comm_s", "float", "s", "gradient synchronization not hidden"),
    _col("exposed_offload_s", "float", "s", "activation copies to and from the host not hidden"),
    _col("pipeline_bubble_s", "float", "s", "critical stage idle in the pipeline"),
    _col("other_s", "float", "s", "optimizer step, ZeRO gather, waiting inside a pass"),
    _col("max_link_utilization", "float", "", "busiest directed link's busy time / iteration time"),
    _col("busiest_link", "string", "", "that link, src->dst (write_job_links: every link)"),
    _col("alone_iteration_time_s", "float", "s", "iteration time without the neighbour job"),
    _col("slowdown", "float", "", "iteration time with the neighbour / alone"),
    _col("neighbour_slowdown", "float", "", "the neighbour job's iteration time with this one / alone"),
    _col("memory_per_rank_bytes", "float", "B", "busiest rank's weights, optimizer, activations"),
    _col("fits_memory", "bool", "", "memory_per_rank_bytes fits the GPU memory"),
    _col("status", "string", "", "ok | failed"),
    _col("error", "string", "", "error message of a failed point"),
    _col("point_index", "int", "", "index of the point in the expanded sweep (row order)"),
)

#: Columns that describe a job point; the rest are results.
JOB_POINT_COLUMNS: tuple[str, ...] = (
    "scenario", "point_key", "topology", "hardware", "model", "hidden", "heads", "layers", "seq",
    "vocab", "dtype", "n_devices", "tp_scheme", "d1", "d2", "tp_mesh", "tp", "pp", "dp", "order",
    "placement", "micro_batch", "global_batch", "n_microbatches", "schedule", "virtual_stages",
    "chunks", "algorithm", "sequence_parallel", "recompute", "zero", "network", "perturb",
    "neighbour", "cp", "ep", "partition", "offload_activations", "point_index",
)  # fmt: skip

#: The table of one whole training iteration per point (a scenario with job keys).
JOB_SCHEMA = ResultsSchema(
    "job", JOB_COLUMNS, JOB_POINT_COLUMNS,
    ("topology", "n_devices", "model", "tp_mesh", "pp", "dp", "micro_batch", "schedule"),
)  # fmt: skip


#: The columns a scenario that asks for parameter draws (``uncertainty: {draws: N}``,
#: :mod:`atpsim.api.uncertainty`) adds after the step table's: percentiles over the N draws
#: of the fitted parameters (the point estimate stays in step_time_s and tflops_per_gpu).
UNCERTAINTY_COLUMNS: tuple[Column, ...] = (
    _col("draws", "int", "", "parameter draws behind the percentiles"),
    _col("draw_seed", "int", "", "seed of the parameter draws (the same for every point)"),
    _col("uncertainty_sources", "string", "", "the fits whose parameters were drawn"),
    *(_col(f"step_time_s_p{q}", "float", "s", f"{q}th percentile of step_time_s over the draws")
      for q in (10, 50, 90)),
    *(_col(f"tflops_per_gpu_p{q}", "float", "TFLOP/s (1e12)",
           f"{q}th percentile of tflops_per_gpu over the draws") for q in (10, 50, 90)),
)  # fmt: skip

#: The step table of a scenario with parameter draws: every step column, then the draws'.
STEP_UNCERTAINTY_SCHEMA = ResultsSchema(
    "step-uncertainty", COLUMNS + UNCERTAINTY_COLUMNS, POINT_COLUMNS, STEP_SCHEMA.describe
)

#: The columns a job scenario (or a search) with parameter draws adds after the job table's:
#: as :data:`UNCERTAINTY_COLUMNS`, with the iteration time in place of the step time (the
#: point estimate stays in iteration_time_s and tflops_per_gpu).
JOB_UNCERTAINTY_COLUMNS: tuple[Column, ...] = (
    *UNCERTAINTY_COLUMNS[:3],
    *(_col(f"iteration_time_s_p{q}", "float", "s", f"{q}th percentile of iteration_time_s over the draws")
      for q in (10, 50, 90)),
    *UNCERTAINTY_COLUMNS[-3:],
)  # fmt: skip

#: The job table of a scenario or search with parameter draws: every job column, then the draws'.
JOB_UNCERTAINTY_SCHEMA = ResultsSchema(
    "job-uncertainty", JOB_COLUMNS + JOB_UNCERTAINTY_COLUMNS, JOB_POINT_COLUMNS, JOB_SCHEMA.describe
)

#: The two workloads, by name: ``step`` (one layer's pass on one TP group) and ``job`` (a
#: whole iteration of a TP x PP x DP layout), each with its table (a step table with parameter
#: draws is a step's); :mod:`atpsim.scenario.workload` and the registries key on these names.
Workload = Literal["step", "job"]
STEP: Workload = "step"
JOB: Workload = "job"
SCHEMAS: dict[str, ResultsSchema] = {STEP: STEP_SCHEMA, JOB: JOB_SCHEMA}
WORKLOADS: tuple[Workload, ...] = (STEP, JOB)


def workload_of(table: Any) -> Workload:
    """The workload (``"step"`` or ``"job"``) of *table*, a frame or its column names: a job's
    table is the one with the job schema's ``iteration_time_s``."""
    columns = getattr(table, "columns", table)
    return JOB if "iteration_time_s" in columns else STEP


class ResultsError(AtpsimError):
    """A results row or table that does not match the schema."""


def column(name: str) -> Column:
    """The declared :class:`Column` called *name* (of the step table)."""
    return STEP_SCHEMA.column(name)


def normalize_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """A complete step-table row in schema order (:meth:`ResultsSchema.normalize_row`)."""
    return STEP_SCHEMA.normalize_row(values)


def _coerce(col: Column, value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        if col.dtype == "string":
            return str(value)
        if col.dtype == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if col.dtype == "float":
            return float(value)
        return _to_bool(value)
    except (TypeError, ValueError):
        raise ResultsError(
            f"results column {col.name!r} expects {col.dtype}, got {value!r}"
        ) from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.strip().lower() in ("true", "1", "yes"):
            return True
        if value.strip().lower() in ("false", "0", "no"):
            return False
        raise ValueError(value)
    return bool(value)


def pandas_dtypes() -> dict[str, str]:
    """Column -> pandas dtype of the step table (:meth:`ResultsSchema.pandas_dtypes`)."""
    return STEP_SCHEMA.pandas_dtypes()


def describe_schema() -> str:
    """The step table's schema as a Markdown table (column, dtype, unit, description)."""
    return STEP_SCHEMA.describe_markdown()
