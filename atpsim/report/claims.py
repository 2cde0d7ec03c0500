"""The paper's claims about a figure, checked against the simulated results (issue 14).

A scenario's ``reference.claims`` (:class:`atpsim.scenario.report.Claim`) quotes what the
paper says about the figure it regenerates; each names a check, a small function registered
here that reads the results table and returns what the simulation shows and whether that
agrees. The report lists every claim with its verdict, so a disagreement is stated, not left
for the reader to find; a claim's *why* (what drives the disagreement, as a sensitivity run
showed it) is printed beside its verdict. Throughput is ``tflops_per_gpu`` (a ratio, so the unit does not
matter); Megatron-LM is ATP-1 (DeviceMesh(N, 1)) without chunks, as in the paper's Figure 10;
only simulated (des) rows count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pandas as pd

from atpsim.report.chunk_table import METRIC as TABLE_METRIC
from atpsim.report.chunk_table import cells
from atpsim.report.data import atp_rows, ordered
from atpsim.scenario.report import CLAIM_CHECKS, Claim, Reference

METRIC = "tflops_per_gpu"
T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """What the simulation shows for a claim (*shown*, short text) and whether it agrees;
    *agrees* is None where the results hold no rows to check it on."""

    claim: Claim
    shown: str
    agrees: bool | None


Check = Callable[[Claim, pd.DataFrame], tuple[str, bool]]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    """Register a claim check under *name* (one of CLAIM_CHECKS)."""

    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def verdicts(frame: pd.DataFrame, reference: Reference | None) -> list[Verdict]:
    """Each claim of *reference* checked on the simulated rows of *frame*."""
    if reference is None:
        return []
    simulated = frame[(frame["status"] == "ok") & (frame["mode"] != "analytic")]
    out = []
    for claim in reference.claims:
        rows = _claim_rows(simulated, claim)
        if rows.empty:
            out.append(Verdict(claim, "no simulated rows", None))
            continue
        try:
            shown, agrees = CHECKS[claim.check](claim, rows)
        except _NoRows:
            out.append(Verdict(claim, "no simulated rows it applies to", None))
            continue
        out.append(Verdict(claim, shown, bool(agrees)))
    return out


class _NoRows(Exception):
    """A check found none of the rows it compares (e.g. no row at the claimed chunk count):
    the claim is shown as "no data" rather than held vacuously or failing."""


def _claim_rows(frame: pd.DataFrame, claim: Claim) -> pd.DataFrame:
    rows = frame[frame["topology"].str.lower() == claim.topology.lower()]
    return rows[rows["model"].isin(claim.models)] if claim.models else rows


def _per_model(rows: pd.DataFrame, value: Callable[[pd.DataFrame], T | None]) -> dict[str, T]:
    """*value* of each model's rows, in the table's model order (models whose value is None
    or NaN left out; _NoRows where that leaves none)."""
    result = {model: value(rows[rows["model"] == model]) for model in ordered(rows["model"])}
    found = {m: v for m, v in result.items() if v is not None and v == v}
    if not found:
        raise _NoRows
    return found


def _megatron(rows: pd.DataFrame) -> float:
    atp = atp_rows(rows)
    return float(atp[(atp["d2"] == 1) & (atp["chunks"] == 1)][METRIC].max())


def _best_atp(rows: pd.DataFrame) -> float:
    return float(atp_rows(rows)[METRIC].max())


def _best_summa(rows: pd.DataFrame) -> float:
    return float(rows[rows.get("scheme", pd.Series(dtype=str)) == "summa"][METRIC].max())


def _in_range(value: float, claim: Claim) -> bool:
    return (claim.low is None or value >= claim.low) and (claim.high is None or value <= claim.high)


def _span(values: list[float], percent: bool = True) -> str:
    """'+5%' or '+5% to +8%' (*percent*), else '0.18' or '0.18-0.69': the range as shown."""
    low, high = (f"{v:+.0%}" if percent else f"{v:.2f}" for v in (min(values), max(values)))
    return low if low == high else f"{low} to {high}" if percent else f"{low}-{high}"


@check("best_mesh")
def best_mesh(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """The fastest ATP mesh at chunks 1, per model, is *claim.mesh*."""
    plain = atp_rows(rows)
    plain = plain[plain["chunks"] == 1]
    best = _per_model(plain, lambda r: str(r.loc[r[METRIC].idxmax(), "mesh"]) if len(r) else None)
    shown = ", ".join(f"{m} {mesh}" for m, mesh in best.items())
    return shown, all(mesh == claim.mesh for mesh in best.values())


@check("atp_gain")
def atp_gain(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """ATP's best (any mesh, any chunk count) over Megatron-LM, per model, lies in range."""
    gains = list(_per_model(rows, lambda r: _best_atp(r) / _megatron(r) - 1).values())
    return _span(gains), all(_in_range(g, claim) for g in gains)


@check("summa_below_megatron")
def summa_below_megatron(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """The best SUMMA grid is slower than Megatron-LM for every model."""
    ratios = list(_per_model(rows, lambda r: _best_summa(r) / _megatron(r)).values())
    return f"SUMMA at {_span(ratios, False)} of Megatron-LM", all(r < 1 for r in ratios)


@check("atp_beats_summa")
def atp_beats_summa(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """ATP's best beats SUMMA's for every model but *except_models*, which it does not."""
    ratios = _per_model(rows, lambda r: _best_atp(r) / _best_summa(r))
    shown = ", ".join(f"{m} {r:.2f}" for m, r in ratios.items())
    agrees = all((r > 1) != (m in claim.except_models) for m, r in ratios.items())
    return f"ATP / SUMMA: {shown}", agrees


@check("summa_advantage_shrinks")
def summa_advantage_shrinks(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """SUMMA over Megatron-LM falls from each model to the next, ending below 1 (the paper:
    "performed poorly with M4")."""
    ratios = list(_per_model(rows, lambda r: _best_summa(r) / _megatron(r)).values())
    falling = all(b < a for a, b in zip(ratios, ratios[1:], strict=False))
    return "SUMMA / Megatron-LM: " + ", ".join(f"{r:.2f}" for r in ratios), falling and ratios[-1] < 1


@check("chunk_gain")
def chunk_gain(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """*claim.chunks* chunks over chunks 1 on the mesh that is best at chunks 1, per model."""

    def gain(r: pd.DataFrame) -> float:
        plain = r[r["chunks"] == 1]
        if plain.empty:
            return float("nan")
        mesh = plain.loc[plain[METRIC].idxmax(), "mesh"]
        chunked = r[(r["mesh"] == mesh) & (r["chunks"] == claim.chunks)][METRIC]
        return float(chunked.max() / plain[METRIC].max() - 1) if len(chunked) else float("nan")

    gains = list(_per_model(atp_rows(rows), gain).values())
    return _span(gains), all(_in_range(g, claim) for g in gains)


@check("comm_trend")
def comm_trend(claim: Claim, rows: pd.DataFrame) -> tuple[str, bool]:
    """ATP-*claim.atp*'s communication in Delta from the fewest to the most devices moves
    the claimed way (per model)."""
    atp = atp_rows(rows)
    atp = atp[(atp["d2"] == claim.atp) & (atp["d1"] * atp["d2"] == atp["n_devices"])]
    if atp.empty:
        raise _NoRows
    shown, agrees = [], True
    for model in ordered(atp["model"]):
        series = atp[atp["model"] == model].groupby("n_devices")["comm_over_delta"].min()
        first, last = float(series.iloc[0]), float(series.iloc[-1])
        shown.append(f"{first:.2f} -> {last:.2f} Delta")
        agrees &= last > first if claim.trend == "up" else last < first
    return "; ".join(shown), agrees


def rank_agreement(frame: pd.DataFrame, reference: Reference | None) -> dict[str, float]:
    """Kendall's tau of the simulated against the paper's Table 3 cells, per topology (the
    ordering of its (model, chunks) cells; the Baseline's mesh kept for the chunk rows, as in
    the chunk table). Empty without a Table 3 reference."""
    if reference is None or not reference.table3:
        return {}
    paper = reference.cells()
    simulated = {
        (str(c.model), str(c.topology).lower(), int(c.chunks)): float(getattr(c, TABLE_METRIC))
        for c in cells(frame, "des").itertuples()
    }
    taus = {}
    for topology in dict.fromkeys(t for _, t, _ in paper):
        keys = [k for k in paper if k[1] == topology and k in simulated]
        if len(keys) >= 3:
            from scipy.stats import kendalltau  # lazy: scipy.stats takes ~1 s to import

            tau = kendalltau([paper[k] for k in keys], [simulated[k] for k in keys]).statistic
            taus[topology] = float(tau)
    return taus


assert set(CHECKS) == set(CLAIM_CHECKS), "every claim check of the schema is registered"
