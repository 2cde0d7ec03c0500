"""The job workload's report tables and verdicts (its entry in :mod:`atpsim.report.workloads`),
from its results (:data:`atpsim.results.schema.JOB_SCHEMA`); the breakdown figure is
:mod:`atpsim.report.job_figures`, the step workload's tables :mod:`atpsim.report.tables`.

A *comparison* is one (topology, hardware, model, devices, global batch): the layouts that
answer the same question. In each, the best configuration of each TP scheme (Megatron-LM's 1D
TP, ``megatron-1d``; ATP's 2D meshes, ``atp-2d``) is the simulated row that fits in memory
with the shortest iteration (the earliest point on a tie), and :func:`verdicts` says whether
ATP's best beats Megatron-LM's, and by how much, from those two rows alone.
"""

from __future__ import annotations

import pandas as pd

from atpsim.report.document import Table
from atpsim.report.tables import fmt

#: Iteration times closer than this (relative) are reported as a tie: the sentence rounds to 0.1 %.
TIE = 0.001
COMPARISON = ("topology", "hardware", "model", "n_devices", "global_batch")
#: Columns that set points apart beyond the layout (issue 13): compared only with their like.
SETTINGS = ("network", "perturb", "neighbour")
SCHEMES = {"megatron-1d": "Megatron-LM 1D", "atp-2d": "ATP 2D"}
BEST_COLUMNS = (
    "topology", "model", "n_devices", "tp_scheme", "tp_mesh", "sequence_parallel", "pp", "dp",
    "micro_batch", "schedule", "iteration_time_s", "samples_per_s", "tflops_per_gpu", "mfu",
    "memory_per_rank_bytes",
)  # fmt: skip
#: Settings a job sweep can vary beyond the layout: the best table shows each one the sweep
#: varied (after the schedule), so that a row can be written back into a scenario.
SWEPT_SETTINGS = ("virtual_stages", "chunks", "recompute", "zero", "cp", "ep", "partition",
                  "offload_activations", "algorithm", "placement", "order")
ALL_COLUMNS = (
    "topology", "model", "n_devices", "tp_mesh", "pp", "dp", "micro_batch", "global_batch",
    "schedule", "virtual_stages", "sequence_parallel", "recompute", "zero", "iteration_time_s",
    "tflops_per_gpu", "mfu", "pipeline_bubble_s", "exposed_dp_comm_s",
    "memory_per_rank_bytes", "fits_memory", "status",
)  # fmt: skip
HEADERS = {
    "n_devices": "GPUs", "tp_scheme": "TP scheme", "tp_mesh": "TP mesh",
    "micro_batch": "micro-batch", "global_batch": "global batch",
    "virtual_stages": "virtual", "sequence_parallel": "seq. par.",
    "iteration_time_s": "iteration [s]", "samples_per_s": "samples/s",
    "tflops_per_gpu": "TFLOP/s per GPU [10^12]", "mfu": "MFU", "memory_per_rank_bytes": "memory [GB]",
    "fits_memory": "fits", "pipeline_bubble_s": "bubble [s]", "exposed_dp_comm_s": "exposed DP [s]",
    "max_link_utilization": "busiest link busy", "busiest_link": "busiest link",
    "isolated_s": "isolated [s]", "joint_s": "one network [s]", "change": "change",
    "dp_isolated_s": "exposed DP isolated [s]", "dp_joint_s": "exposed DP joint [s]",
    "offload_activations": "offload", "exposed_offload_s": "exposed host copies [s]",
}  # fmt: skip


def best_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The best row of each comparison and TP scheme (see the module docstring), in the
    order of the sweep."""
    fits = frame["fits_memory"].fillna(False).astype(bool)
    rows = frame[(frame["status"] == "ok") & fits & frame["iteration_time_s"].notna()]
    if rows.empty:
        return rows
    rows = rows.sort_values(["iteration_time_s", "point_index"], kind="stable")
    best = rows.groupby([*comparison(frame), "tp_scheme"], sort=False, dropna=False).head(1)
    return best.sort_values("point_index", kind="stable")


def comparison(frame: pd.DataFrame) -> list[str]:
    """The columns a comparison shares: :data:`COMPARISON` and the settings that vary."""
    return [*COMPARISON, *(c for c in SETTINGS if c in frame.columns and frame[c].nunique() > 1)]


def _cell(name: str, value: object) -> str:
    if name == "memory_per_rank_bytes":
        return fmt(None if value is None or pd.isna(value) else float(value) / 1e9, 3)  # type: ignore[arg-type]
    if name in ("mfu", "max_link_utilization", "change"):
        return "" if value is None or pd.isna(value) else f"{float(value):.1%}"  # type: ignore[arg-type]
    if name == "tp_scheme":
        return SCHEMES.get(str(value), str(value))
    return fmt(value)


def _table(frame: pd.DataFrame, names: tuple[str, ...], caption: str) -> Table:
    header = [HEADERS.get(n, n) for n in names]
    body = [[_cell(n, v) for n, v in zip(names, row, strict=True)]
            for row in frame[list(names)].astype(object).values]  # fmt: skip
    return Table(header, body, caption)


def best_table(frame: pd.DataFrame) -> Table | None:
    """The best configuration of each TP scheme per comparison; None without one."""
    best = best_rows(frame)
    if best.empty:
        return None
    caption = "Best configuration per topology, model, GPU count and TP scheme (memory: GB = 10^9 B)"
    swept = tuple(c for c in SWEPT_SETTINGS if c in frame.columns and frame[c].astype(str).nunique() > 1)
    at = BEST_COLUMNS.index("schedule") + 1
    extra = tuple(c for c in (*comparison(frame)[len(COMPARISON):], "max_link_utilization", "busiest_link")
                  if c in frame.columns and best[c].notna().any())  # fmt: skip
    return _table(best, BEST_COLUMNS[:at] + swept + BEST_COLUMNS[at:] + extra, caption)


def all_rows(frame: pd.DataFrame) -> Table:
    """Every point, main columns (every column: results.csv), and the network, perturbation
    and neighbour where a sweep varies them (else rows would read as repeats)."""
    varied = tuple(c for c in ("network", "perturb", "neighbour", "offload_activations", "exposed_offload_s")
                   if c in frame.columns and frame[c].astype(str).nunique() > 1)  # fmt: skip
    columns = ALL_COLUMNS[:-1] + varied + ALL_COLUMNS[-1:] if varied else ALL_COLUMNS
    return _table(frame, columns, "All points (every column: results.csv)")


def failures(frame: pd.DataFrame) -> Table | None:
    """Failed points grouped by error: count, an example point, the message. None if none."""
    failed = frame[frame["status"] == "failed"]
    if failed.empty:
        return None
    body = []
    for error, group in failed.groupby("error", sort=False, dropna=False):
        first = group.iloc[0]
        example = (f"{first['topology']} {first['model']} {first['n_devices']} GPUs tp "
                   f"{first['tp_mesh']} pp {first['pp']} dp {first['dp']}")  # fmt: skip
        body.append([str(len(group)), example, fmt(error)])
    return Table(["points", "first point", "error"], body, "Failed points")


def layout_text(row: pd.Series) -> str:
    """A layout in a few words: sequence parallelism where it ran (1D TP only), context and
    expert parallelism above 1 and an uneven partition where the row has them."""
    ran = row.get("sequence_parallel")
    sp = ", sequence parallelism" if not pd.isna(ran) and bool(ran) else ""
    cp = _above_one(row, "cp", ", cp {}")
    ep = _above_one(row, "ep", ", ep {}")
    split = row.get("partition")
    uneven = f" [{split}]" if isinstance(split, str) and split not in ("even", "") else ""
    return (f"{row['tp_mesh']}{sp}{cp}, pp {row['pp']}{uneven}, dp {row['dp']}{ep}, micro-batch "
            f"{row['micro_batch']}")  # fmt: skip


def _above_one(row: pd.Series, name: str, text: str) -> str:
    value = row.get(name)
    return text.format(int(value)) if value is not None and not pd.isna(value) and int(value) > 1 else ""


def verdicts(frame: pd.DataFrame) -> list[str]:
    """One sentence per comparison (see the module docstring): does ATP's best 2D mesh beat
    Megatron-LM's best 1D TP, with DP and PP searched too, and by how much."""
    best = best_rows(frame)
    sentences = []
    for key, group in best.groupby(comparison(frame), sort=False, dropna=False):
        where = f"{key[2]} on {key[0]} ({key[1]}), {key[3]} GPUs, global batch {key[4]}"
        where += "".join(f", {name} {value}" for name, value in zip(comparison(frame)[5:], key[5:], strict=True))
        by_scheme = {str(r["tp_scheme"]): r for _, r in group.iterrows()}
        sentences.append(_verdict(where, by_scheme.get("megatron-1d"), by_scheme.get("atp-2d")))
    return sentences


def _verdict(where: str, megatron: pd.Series | None, atp: pd.Series | None) -> str:
    if megatron is None or atp is None:
        missing = "ATP 2D mesh" if atp is None else "Megatron-LM 1D layout"
        return f"{where}: no {missing} was simulated that fits in memory, so there is no comparison."
    t_meg, t_atp = float(megatron["iteration_time_s"]), float(atp["iteration_time_s"])
    detail = (f"ATP's best 2D mesh ({layout_text(atp)}) takes {t_atp:.3g} s per iteration "
              f"({float(atp['tflops_per_gpu']):.3g} TFLOP/s per GPU), Megatron-LM's best 1D TP "
              f"({layout_text(megatron)}) {t_meg:.3g} s ({float(megatron['tflops_per_gpu']):.3g})")  # fmt: skip
    if abs(t_atp / t_meg - 1) < TIE:
        return f"{where}: a tie, {detail}: within {TIE:.1%} of each other."
    if t_atp < t_meg:
        return f"{where}: yes, {detail}: ATP is {t_meg / t_atp - 1:.1%} faster."
    return f"{where}: no, {detail}: Megatron-LM is {t_atp / t_meg - 1:.1%} faster."


#: The columns of :func:`contention`: a layout, alone and together.
CONTENTION = ("model", "n_devices", "tp_scheme", "tp_mesh", "pp", "dp", "isolated_s", "joint_s",
              "change", "dp_isolated_s", "dp_joint_s", "busiest_link", "max_link_utilization")
_LAYOUT = ("topology", "hardware", "model", "n_devices", "tp_mesh", "pp", "dp", "micro_batch",
           "global_batch", "schedule", "virtual_stages", "chunks", "sequence_parallel", "recompute",
           "zero", "perturb", "neighbour")


def contention(frame: pd.DataFrame) -> tuple[Table, list[str]] | None:
    """Each layout simulated both ways (``network: [joint, isolated]``): its iteration with
    every call alone and with the calls in flight sharing links, the change, the exposed
    gradient synchronisation each way, the busiest link; and one sentence per TP scheme. None
    where no layout was run both ways."""
    if "network" not in frame.columns or frame["network"].nunique() < 2:
        return None
    ok = frame[frame["status"] == "ok"].dropna(subset=["iteration_time_s"])
    keys = [c for c in _LAYOUT if c in ok.columns]
    joint = ok[ok["network"] == "joint"].set_index(keys)
    isolated = ok[ok["network"] == "isolated"].set_index(keys)
    both = joint.merge(isolated, how="inner", left_index=True, right_index=True, suffixes=("", "_isolated")).reset_index()
    if both.empty:
        return None
    table = both.assign(isolated_s=both["iteration_time_s_isolated"], joint_s=both["iteration_time_s"],
                        change=both["iteration_time_s"] / both["iteration_time_s_isolated"] - 1,
                        dp_isolated_s=both["exposed_dp_comm_s_isolated"], dp_joint_s=both["exposed_dp_comm_s"])
    names = tuple(c for c in CONTENTION if c in table.columns)
    if table["topology"].nunique() > 1:  # rows of different machines would read as repeats
        names = ("topology", *names)
    caption = ("Every layout run with each call alone (isolated) and on one network (joint): "
               "iteration [s], change, exposed DP [s] each way, the busiest link on one network")
    sentences = []
    for scheme, group in table.groupby("tp_scheme", sort=False):
        worst = group.loc[group["change"].idxmax()]
        sentences.append(f"{SCHEMES.get(str(scheme), scheme)}: one network changes the iteration by "
                         f"{group['change'].min():+.2%} to {group['change'].max():+.2%} over "
                         f"{len(group)} layouts (most: {layout_text(worst)}, {worst['model']}, "
                         f"{worst['n_devices']} GPUs).")  # fmt: skip
    return _table(table, names, caption), sentences
