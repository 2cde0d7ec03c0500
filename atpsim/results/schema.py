"""The one declared results schema: every column of a results table, its dtype and its unit.

A results table has one row per sweep point. The first columns describe the point (filled by
the sweep runner from :func:`atpsim.scenario.point.point_columns`, so a failed point still
shows what it was); the rest are what :func:`atpsim.api.simulate_point` measured. Units follow
the house style: seconds, bytes, bytes/s; TFLOP/s in SI (10^12) and, for comparisons with the
paper, in its 2^40 unit. ``comm_over_delta`` is the communication time in units of the paper's
Delta = 2·L·b·s·h / GroupBW (Section 3.5, Figure 12), empty where no GroupBW is defined.

Everything that reads or writes a table (:mod:`atpsim.results.io`, the sweep runner, the
report) takes its column list, order and dtypes from a :class:`ResultsSchema`: this step
table's :data:`STEP_SCHEMA` (:data:`COLUMNS`), or the whole-job table of a job scenario
(:data:`atpsim.results.job_schema.JOB_SCHEMA`).
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
