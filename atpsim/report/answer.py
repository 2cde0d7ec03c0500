"""A report's answer: one short paragraph and one small table at the top of the page, so a
reader has the result on the first screen, before the provenance, findings and figures.

A *case* is one question the sweep answers: for a step table one (topology, hardware, model,
GPU count) and the settings that vary beside the layout; for a job table one comparison of
:mod:`atpsim.report.job_tables`. Per case the table gives the fastest row, its time, its margin
over the runner-up (the fastest row of another layout) and over the baseline (a step table:
Megatron-LM's 1D TP, DeviceMesh(N, 1) without chunks; a job table: the best row of the other
TP scheme), and the p10-p90 interval of its time where the run drew the fitted parameters
(``--uncertainty``). Every number comes from the rows the page's tables show (the simulated
rows that fit in memory), and the paragraph's counts are counted on this table's rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from atpsim.report import job_tables
from atpsim.report.data import ok_rows, ordered
from atpsim.report.document import Details, Heading, Paragraph, Table
from atpsim.report.tables import fmt

#: Cases shown in the open table; more are folded under it.
OPEN_CASES = 8
#: A step case: the columns that name the machine and model.
STEP_CASE = ("topology", "hardware", "model", "n_devices")
#: Step settings that make separate cases where they vary (besides the layout).
STEP_SETTINGS = ("batch", "seq", "algorithm", "placement")


@dataclass(frozen=True)
class Case:
    """One case's answer: *where* (the case in words), the fastest row's layout in words
    (*best*), its *time_s*, whether it is a 2D mesh (*two_d*), its margin over the runner-up
    and over the baseline (fractions; None where there is none) and its p10/p90 (s)."""

    where: str
    best: str
    time_s: float
    two_d: bool
    runner_up: str | None
    over_runner_up: float | None
    over_baseline: float | None
    p10_s: float | None = None
    p90_s: float | None = None


def answer_blocks(frame: pd.DataFrame, workload: str) -> list[Heading | Paragraph | Table | Details]:
    """The page's answer section for a *workload* (``step`` or ``job``) table; empty when no
    row ran."""
    cases = cases_of(frame, workload)
    if not cases:
        return []
    table = answer_table(cases, workload)
    blocks: list[Heading | Paragraph | Table | Details] = [
        Heading("Answer"), Paragraph(answer_sentence(cases, workload))]
    if len(cases) <= OPEN_CASES:
        return [*blocks, table]
    head = Table(table.header, table.rows[:OPEN_CASES], table.caption)
    rest = Table(table.header, table.rows[OPEN_CASES:])
    return [*blocks, head, Details(f"The other {len(cases) - OPEN_CASES} cases", [rest])]


def cases_of(frame: pd.DataFrame, workload: str) -> list[Case]:
    """The cases of a *workload* (``step`` or ``job``) table."""
    return job_cases(frame) if workload == "job" else step_cases(frame)


def answer_lines(frame: pd.DataFrame, workload: str) -> list[str]:
    """The answer as terminal lines: the sentence, then one line per case (what ``atpsim
    run`` prints when it ends); empty when no row ran."""
    cases = cases_of(frame, workload)
    if not cases:
        return []
    baseline = "the other TP scheme" if workload == "job" else "N x 1, 1 chunk"
    lines = [answer_sentence(cases, workload).removesuffix(" Per case:")]
    for c in cases:
        margins = [f"{_pct(c.over_runner_up)} on {c.runner_up}" if c.runner_up else "",
                   f"{_pct(c.over_baseline)} on {baseline}" if c.over_baseline is not None else ""]
        ahead = "; ".join(m for m in margins if m)
        lines.append(f"{c.where}: {c.best}, {fmt(c.time_s)} s" + (f" ({ahead})" if ahead else ""))
    return lines


def answer_sentence(cases: list[Case], workload: str) -> str:
    """How many cases a 2D mesh wins, and the median margin over the baseline, counted on
    *cases* (the table's rows)."""
    wins = sum(c.two_d for c in cases)
    margins = [c.over_baseline for c in cases if c.over_baseline is not None]
    if workload == "job" and not margins:
        where = "" if len(cases) == 1 else f" in each of the {len(cases)} cases"
        text = (f"Which layout, of those the scenario lists, trains fastest? Only one TP scheme "
                f"ran{where} (list the other scheme's meshes in parallelism.tp to compare "
                f"them).")  # fmt: skip
        baseline = ""
    elif workload == "job":
        text = (f"Which TP scheme, with data and pipeline parallelism searched beside it, trains "
                f"fastest? ATP's 2D mesh in {wins} of {len(cases)} cases, Megatron-LM's 1D TP "
                f"in {len(cases) - wins}.")  # fmt: skip
        baseline = "the other scheme's best"
    else:
        text = (f"Which DeviceMesh(d1, d2) and chunk count make a step fastest? An ATP 2D mesh "
                f"(d2 > 1) in {wins} of {len(cases)} cases.")  # fmt: skip
        baseline = "Megatron-LM's 1D TP (N x 1, one chunk)"
    if margins:
        text += (f" The fastest row is {statistics.median(margins):.1%} faster than {baseline} "
                 f"(median over the cases that have one).")
    return text + " Per case:"


def answer_table(cases: list[Case], workload: str) -> Table:
    """One row per case (see the module docstring)."""
    baseline = "faster than the other TP scheme by" if workload == "job" else "faster than N x 1, 1 chunk by"
    time = "iteration [s]" if workload == "job" else "step [s]"
    header = ["case", "fastest", time, "runner-up", "faster than it by", baseline]
    interval = any(c.p10_s is not None for c in cases)
    if interval:
        header.append("p10-p90 [s]")
    rows = []
    for c in cases:
        row = [c.where, c.best, fmt(c.time_s), c.runner_up or "-", _pct(c.over_runner_up),
               _pct(c.over_baseline)]  # fmt: skip
        if interval:
            row.append("-" if c.p10_s is None else f"{fmt(c.p10_s)}-{fmt(c.p90_s)}")
        rows.append(row)
    return Table(header, rows, "The fastest row per case, simulated, fitting in memory")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def step_cases(frame: pd.DataFrame) -> list[Case]:
    """One :class:`Case` per machine, model and varied setting of a step table."""
    rows = _simulated(frame)
    if rows.empty:
        return []
    keys = [*STEP_CASE, *(c for c in STEP_SETTINGS if c in rows and rows[c].nunique() > 1)]
    keys = [k for k in keys if k in rows]
    cases = []
    for key, group in rows.groupby(keys, sort=False, dropna=False):
        group = group.sort_values(["step_time_s", "point_index"], kind="stable")
        best = group.iloc[0]
        other = group[group["mesh"] != best["mesh"]]
        baseline = group[(group["d2"] == 1) & (group["chunks"] == 1)]
        cases.append(Case(
            _where(dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))),
            _step_layout(best), float(best["step_time_s"]), _atp_2d(best),
            None if other.empty else _step_layout(other.iloc[0]),
            _ahead(best, other, "step_time_s"), _ahead(best, baseline, "step_time_s"),
            *_interval(best, "step_time_s")))  # fmt: skip
    return cases


def job_cases(frame: pd.DataFrame) -> list[Case]:
    """One :class:`Case` per comparison of a job table (:func:`job_tables.comparison`)."""
    rows = _simulated(frame)
    rows = rows[rows["iteration_time_s"].notna()] if not rows.empty else rows
    if rows.empty:
        return []
    keys = job_tables.comparison(frame)
    cases = []
    for key, group in rows.groupby(keys, sort=False, dropna=False):
        group = group.sort_values(["iteration_time_s", "point_index"], kind="stable")
        best = group.iloc[0]
        layout = job_tables.layout_text(best)
        other = group[[job_tables.layout_text(r) != layout for _, r in group.iterrows()]]
        baseline = group[group["tp_scheme"] != best["tp_scheme"]]
        where = dict(zip(keys, key, strict=True))
        cases.append(Case(
            _where({k: v for k, v in where.items() if k != "global_batch"})
            + f", batch {where['global_batch']}",
            f"{job_tables.SCHEMES.get(str(best['tp_scheme']), best['tp_scheme'])} {layout}",
            float(best["iteration_time_s"]), str(best["tp_scheme"]) == "atp-2d",
            None if other.empty else job_tables.layout_text(other.iloc[0]),
            _ahead(best, other, "iteration_time_s"), _ahead(best, baseline, "iteration_time_s"),
            *_interval(best, "iteration_time_s")))  # fmt: skip
    return cases


def _simulated(frame: pd.DataFrame) -> pd.DataFrame:
    """The ok rows that fit in memory, of the event engine where the table has it."""
    rows = ok_rows(frame)
    if "fits_memory" in rows:
        rows = rows[rows["fits_memory"].fillna(True).astype(bool)]
    if "mode" in rows and not rows.empty:
        modes = ordered(rows["mode"])
        rows = rows[rows["mode"] == ("des" if "des" in modes else modes[0])]
    return rows


def _ahead(best: pd.Series, others: pd.DataFrame, column: str) -> float | None:
    """How much faster *best* is than the fastest of *others* (a fraction; None for none)."""
    if others.empty:
        return None
    return float(others[column].min()) / float(best[column]) - 1


def _interval(best: pd.Series, column: str) -> tuple[float | None, float | None]:
    low, high = best.get(f"{column}_p10"), best.get(f"{column}_p90")
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None, None
    return float(low), float(high)


def _atp_2d(row: pd.Series) -> bool:
    """An ATP mesh with d2 > 1 (a SUMMA grid is 2D too, but not ATP's)."""
    scheme = row.get("scheme")
    return int(row["d2"]) > 1 and (not isinstance(scheme, str) or scheme in ("atp", ""))


def _step_layout(row: pd.Series) -> str:
    chunks = int(row["chunks"])
    scheme = row.get("scheme")
    named = f"{scheme} " if isinstance(scheme, str) and scheme not in ("atp", "") else ""
    return f"{named}{row['mesh']}, {chunks} chunk{'s' if chunks > 1 else ''}"


def _where(values: dict[str, object]) -> str:
    """A case in words: ``M2 on ic3 (a100-...), 8 GPUs``."""
    text = f"{values.get('model')} on {values.get('topology')}"
    if values.get("hardware"):
        text += f" ({values['hardware']})"
    text += f", {values.get('n_devices')} GPUs"
    skip = {"model", "topology", "hardware", "n_devices"}
    return text + "".join(f", {k} {v}" for k, v in values.items() if k not in skip)
