"""A report's key findings: a few sentences at the top of the page, each computed from the
results table (never written by hand), so a reader sees what the sweep shows before its
figures and raw rows.

Each finding is a small function of a :class:`Context` that returns a sentence, or None
where it does not apply (a table without chunks has no chunk finding); :data:`STEP_FINDINGS`
and :data:`JOB_FINDINGS` list each workload's in page order (its entry in
:mod:`atpsim.report.workloads` names which), and a new kind of report adds its own function
there or passes its own list to :func:`findings`. Throughput is in the page's unit (*Context.unit*); "simulated"
rows are those of the event engine (mode des) where the table has them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from atpsim.report import chunk_table, job_tables, tables
from atpsim.report.claims import Verdict
from atpsim.report.data import TFLOPS_COLUMNS, UNIT_NAMES, ok_rows, ordered, varying
from atpsim.scenario.report import Reference

#: Columns besides the topology that tell apart the machines of one report.
MACHINE_KEYS = ("n_devices", "hardware", "batch", "seq")
#: Columns that tell apart configurations of one machine and model, shown where they vary.
CONFIG_KEYS = ("scheme", "mesh", "chunks", "algorithm", "placement")
#: Most machine groups a finding lists before keeping only each topology's largest.
MAX_GROUPS = 8


@dataclass(frozen=True)
class Context:
    """What the findings read: the results *frame*, the scenario's *reference*, the page's
    TFLOP/s *unit* and the paper's claims as checked (*verdicts*)."""

    frame: pd.DataFrame
    reference: Reference | None
    unit: str
    verdicts: Sequence[Verdict] = ()

    @property
    def metric(self) -> str:
        return TFLOPS_COLUMNS[self.unit]

    def simulated(self) -> pd.DataFrame:
        """The ok rows of the event engine (of the first mode, where there is no des row)."""
        rows = ok_rows(self.frame)
        modes = ordered(rows["mode"]) if "mode" in rows else []
        mode = "des" if "des" in modes else (modes[0] if modes else None)
        return rows[rows["mode"] == mode] if mode is not None else rows


Finding = Callable[[Context], "str | None"]


def findings(context: Context, kinds: Sequence[Finding] | None = None) -> list[str]:
    """The sentences of *kinds* (default :data:`STEP_FINDINGS`) that apply, in order."""
    sentences = (kind(context) for kind in (STEP_FINDINGS if kinds is None else kinds))
    return [s for s in sentences if s]


def points(context: Context) -> str:
    """How many points, how many simulated, failed, out of memory."""
    frame = context.frame
    ok = int((frame["status"] == "ok").sum())
    text = f"{len(frame)} points: {ok} simulated"
    failed = len(frame) - ok
    if failed:
        text += f", {failed} failed (see *Failures*)"
    if "fits_memory" in frame:
        over = int((frame["fits_memory"] == False).sum())  # noqa: E712 (nullable booleans)
        if over:
            text += f"; {over} {'does' if over == 1 else 'do'} not fit in GPU memory"
    return text + "."


def claims(context: Context) -> str | None:
    """How many of the paper's claims hold (the table below lists them)."""
    checked = [v for v in context.verdicts if v.agrees is not None]
    if not checked:
        return None
    agreed = sum(bool(v.agrees) for v in checked)
    verb = "holds" if agreed == 1 else "hold"
    text = f"Of the paper's {len(checked)} claims about this figure, {agreed} {verb} in the simulation"
    if agreed < len(checked):
        text += "; the others are marked **no** under *Against the paper*"
    return text + "."


def table3_errors(context: Context) -> str | None:
    """The mean and the worst error against the paper's Table 3 cells, the cell named."""
    modes = chunk_table.modes(context.frame)
    mode = "des" if "des" in modes else None
    if mode is None:
        return None
    return chunk_table.error_summary(context.frame, context.reference, mode, context.unit)


def _machines(rows: pd.DataFrame) -> tuple[pd.Series, bool]:
    """Each row's machine label (the topology, with the columns of :data:`MACHINE_KEYS`
    that vary inside it), and whether only each topology's most GPUs are kept because
    there would be more than :data:`MAX_GROUPS` labels."""
    keys = ["topology", *varying(rows, MACHINE_KEYS, within="topology")]
    labels = rows[keys].astype(str).agg(lambda r: ", ".join(_named(keys, r)), axis=1)
    return labels, labels.nunique() > MAX_GROUPS


def _named(keys: list[str], values: pd.Series) -> list[str]:
    names = {"n_devices": "{} GPUs", "batch": "batch {}", "seq": "sequence {}"}
    return [names.get(k, "{}").format(v) for k, v in zip(keys, values, strict=True)]


def _largest(rows: pd.DataFrame) -> pd.DataFrame:
    most = rows.groupby("topology")["n_devices"].transform("max")
    return rows[rows["n_devices"] == most]


def _config(row: pd.Series, keys: list[str]) -> str:
    """``atp 4x2 with 2 chunks``: the row's values of *keys*, the chunk count last."""
    parts = [str(row[k]) for k in keys if k != "chunks"]
    chunks = f" with {row['chunks']} chunks" if "chunks" in keys and row["chunks"] != 1 else ""
    return " ".join(parts) + chunks


def fastest(context: Context) -> str | None:
    """Per machine, the fastest configuration of each model (models sharing one listed
    together) and the highest throughput."""
    rows = context.simulated()
    rows = rows[rows[context.metric].notna()]
    if rows.empty:
        return None
    labels, too_many = _machines(rows)
    if too_many:
        rows = _largest(rows)
        labels, _ = _machines(rows)
    keys = [k for k in CONFIG_KEYS if k == "mesh" or rows[k].nunique(dropna=False) > 1]
    parts = []
    for machine in ordered(labels):
        here = rows[labels == machine]
        best = here.loc[here.groupby("model", sort=False)[context.metric].idxmax()]
        by_config: dict[str, list[str]] = {}
        for _, row in best.iterrows():
            by_config.setdefault(_config(row, keys), []).append(str(row["model"]))
        models = "; ".join(f"{', '.join(m)} on {c}" for c, m in by_config.items())
        parts.append(f"{machine}: {models} (best {best[context.metric].max():.4g})")
    where = " at each topology's most GPUs" if too_many else ""
    return (f"Fastest configuration per model{where} (TFLOP/s per GPU, {UNIT_NAMES[context.unit]}): "
            + "; ".join(parts) + ".")  # fmt: skip


def chunk_gains(context: Context) -> str | None:
    """Per topology, the gain of the best chunk count over none, on each configuration's
    fastest mesh without chunks (the paper's Table 3 method)."""
    rows = context.simulated()
    rows = rows[rows[context.metric].notna() & rows["mesh"].notna()]
    if rows.empty or rows["chunks"].nunique() < 2:
        return None
    chosen = chunk_table.chosen_rows(rows, context.metric)
    config = chunk_table.config_keys(chosen)
    parts = []
    for topology in ordered(chosen["topology"]):
        gains = []
        for key in ordered(config[chosen["topology"] == topology]):
            series = chosen[config == key].groupby("chunks")[context.metric].max()
            gains.append(float(series.max() / series.iloc[0] - 1))
        low, high = min(gains), max(gains)
        span = f"{low:+.0%}" if f"{low:+.0%}" == f"{high:+.0%}" else f"{low:+.0%} to {high:+.0%}"
        parts.append(f"{topology} {span}")
    return ("Chunk-based overlap, best chunk count against one chunk on the fastest mesh "
            "without chunks: " + ", ".join(parts) + ".")  # fmt: skip


def least_communication(context: Context) -> str | None:
    """Where the device count varies: at each topology's most GPUs, the least communication
    (in Delta) of any mesh against Megatron-LM's (ATP-1, DeviceMesh(N, 1))."""
    rows = context.simulated()
    rows = rows[rows["comm_over_delta"].notna()]
    if rows.empty or not varying(rows, ["n_devices"], within="topology"):
        return None
    rows = _largest(rows)
    keys = [k for k in ("mesh", "algorithm", "placement") if k == "mesh" or rows[k].nunique() > 1]
    parts = []
    for topology in ordered(rows["topology"]):
        here = rows[rows["topology"] == topology]
        best = here.loc[here["comm_over_delta"].idxmin()]
        text = (f"{topology} at {best['n_devices']} GPUs: {best['comm_over_delta']:.3g} Delta "
                f"({_config(best, keys)})")  # fmt: skip
        atp1 = here[here["d2"] == 1]["comm_over_delta"]
        if len(atp1):
            text += f", ATP-1 {atp1.min():.3g} Delta"
        parts.append(text)
    return "Least communication of any mesh: " + "; ".join(parts) + "."


#: Point columns that, with the mesh, identify a point apart from its mode.
SAME_POINT = ("topology", "n_devices", "hardware", "model", "hidden", "heads", "layers", "batch",
              "seq", "dtype", "mesh", "placement", "chunks", "algorithm", "scheme")  # fmt: skip


def analytic_gap(context: Context) -> str | None:
    """Where the table has analytic rows beside simulated ones: the analytic model's step
    time against the simulation's on the points both ran, and how often both pick the same
    fastest mesh."""
    rows = ok_rows(context.frame, "step_time_s")
    keys = [k for k in SAME_POINT if k in rows]
    des = rows[rows["mode"] == "des"].set_index(keys)
    analytic = rows[rows["mode"] == "analytic"].set_index(keys)
    both = des.index.intersection(analytic.index)
    if both.empty:
        return None
    ratio = analytic.loc[both, "step_time_s"] / des.loc[both, "step_time_s"] - 1
    same, configs = _same_best(des.loc[both], analytic.loc[both], context.metric)
    return (f"The analytic model (Eq. 2) against the simulation on the {len(both)} points both "
            f"ran: its step time is {ratio.min():+.0%} to {ratio.max():+.0%} of the simulated "
            f"one (median |difference| {ratio.abs().median():.0%}); both pick the same fastest "
            f"mesh in {same} of {configs} configurations.")  # fmt: skip


def _same_best(des: pd.DataFrame, analytic: pd.DataFrame, metric: str) -> tuple[int, int]:
    """How many configurations (every point key but the mesh) both modes give the same
    fastest mesh, of how many."""
    config = [n for n in des.index.names if n not in ("mesh", "placement")]
    picks = []
    for table in (des, analytic):
        flat = table.reset_index()
        picks.append(flat.loc[flat.groupby(config, sort=False)[metric].idxmax()]
                     .set_index(config)["mesh"])  # fmt: skip
    return int((picks[0] == picks[1].reindex(picks[0].index)).sum()), len(picks[0])


def uneven_heads(context: Context) -> str | None:
    """The ATP rows whose attention heads do not divide over the mesh
    (:func:`atpsim.report.tables.uneven_heads_note`)."""
    return tables.uneven_heads_note(context.frame)


STEP_FINDINGS: tuple[Finding, ...] = (
    points, claims, table3_errors, fastest, chunk_gains, least_communication, analytic_gap,
    uneven_heads,
)  # fmt: skip


def job_comparisons(context: Context) -> str | None:
    """A job table: in how many comparisons ATP's best 2D mesh beats Megatron-LM's best 1D
    TP (:mod:`atpsim.report.job_tables`), and by how much."""
    best = job_tables.best_rows(context.frame)
    pairs = []
    for _, group in best.groupby(job_tables.comparison(context.frame), sort=False, dropna=False):
        times = dict(zip(group["tp_scheme"], group["iteration_time_s"], strict=True))
        if "megatron-1d" in times and "atp-2d" in times:
            pairs.append((float(times["megatron-1d"]), float(times["atp-2d"])))
    if not pairs:
        return None
    ties = sum(abs(atp / meg - 1) < job_tables.TIE for meg, atp in pairs)
    wins = [meg / atp - 1 for meg, atp in pairs if atp < meg and abs(atp / meg - 1) >= job_tables.TIE]
    losses = [atp / meg - 1 for meg, atp in pairs if atp > meg and abs(atp / meg - 1) >= job_tables.TIE]
    text = (f"ATP's best 2D mesh is faster than Megatron-LM's best 1D TP in {len(wins)} of "
            f"{len(pairs)} comparisons" + _by(wins) + f", slower in {len(losses)}" + _by(losses))  # fmt: skip
    return text + (f", within {job_tables.TIE:.1%} in {ties}" if ties else "") + "."


def _by(gains: list[float]) -> str:
    """`` (by 2.0% to 5.1%)``, `` (by 2.0%)`` for one value, empty for none."""
    if not gains:
        return ""
    low, high = f"{min(gains):.1%}", f"{max(gains):.1%}"
    return f" (by {low})" if low == high else f" (by {low} to {high})"


JOB_FINDINGS: tuple[Finding, ...] = (points, job_comparisons)
