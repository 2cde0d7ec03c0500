"""The report of ``atpsim validate``: a measurements folder's comparison as files beside it.

:func:`write_validation_report` writes the typed table of
:class:`~atpsim.calibrate.compare.Comparison` as ``validation_report.csv`` (one row per check
point, :data:`REPORT_COLUMNS`), summarises it in ``validation_report.md`` (verdict, the fit,
one table row per point: :func:`validation_markdown`) and draws ``validation_report.png``
(:mod:`atpsim.report.validation_plot`). Every number comes from the comparison; nothing is
recomputed here.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from atpsim.calibrate.compare import CheckResult, Comparison
from atpsim.calibrate.measurements.folder import REPORT_PREFIX
from atpsim.calibrate.measurements.settings import TOLERANCE_FILE
from atpsim.report.validation_plot import plot_validation

REPORT_COLUMNS = ("label", "d1", "d2", "chunks", "hidden", "heads", "batch", "seq", "dtype",
                  "measured_s", "predicted_s", "compute_s", "comm_s", "exposed_comm_s",
                  "cpu_share", "overlap", "rel_error", "run_delay_s",
                  "rel_error_without_wait")  # fmt: skip


def write_validation_report(comparison: Comparison) -> list[Path]:
    """Write ``validation_report.{csv,md,png}`` into the comparison's folder; return their
    paths in that order."""
    folder = comparison.folder
    csv_path = write_validation_csv(comparison, folder / f"{REPORT_PREFIX}.csv")
    md_path = folder / f"{REPORT_PREFIX}.md"
    md_path.write_text(validation_markdown(comparison))
    return [csv_path, md_path, plot_validation(comparison, folder / f"{REPORT_PREFIX}.png")]


def write_validation_csv(comparison: Comparison, path: Path) -> Path:
    """One row per check point under :data:`REPORT_COLUMNS` (times to 6 significant digits,
    errors to 4 decimals, empty where not measured); return *path*."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(REPORT_COLUMNS)
        writer.writerows(_csv_row(r) for r in comparison.results)
    return path


def _csv_row(r: CheckResult) -> list[Any]:
    p = r.point
    times = (p.time_s, r.predicted_s, r.compute_s, r.comm_s, r.exposed_comm_s)
    return [p.label, p.d1, p.d2, p.chunks, p.hidden, p.heads, p.batch, p.seq, p.dtype,
            *(f"{v:.6g}" for v in times), f"{r.cpu_share:.4g}", r.overlap, f"{r.rel_error:.4f}",
            _optional(p.run_delay_s, ".6g"), _optional(r.error_without_wait, ".4f")]  # fmt: skip


def validation_markdown(comparison: Comparison) -> str:
    """The comparison as a short markdown page: verdict, the fit, one table row per point."""
    worst = comparison.worst
    verdict = "PASS" if comparison.passed else "FAIL"
    lines = [
        f"# Validation: {comparison.folder.resolve().name}",
        "",
        f"**{verdict}**: median |error| {comparison.median_abs_error:.1%} against a tolerance "
        f"of {comparison.tolerance:.0%} ({TOLERANCE_FILE}; each time is the "
        f"{comparison.statistic} of its repetitions); worst {worst.rel_error:+.1%} at "
        f"{worst.point.label}; {len(comparison.results)} check points (whole layers, "
        "forward + backward), predicted from the fit of the collectives, GEMMs and memory-bound "
        "ops (fitted/).",
        "",
        *_wait_lines(comparison),
        *_fit_lines(comparison.fit_summary),
        "| point | measured ms | predicted ms | error | compute ms | comm ms | exposed ms "
        "| core share | overlap | wait ms | error vs measured - wait |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        *(_table_row(r) for r in comparison.results),
        "",
        "compute and comm: busy time of the critical rank's two streams; core share: the part "
        "of a CPU core each rank computes with (ranks beyond the cores share them); overlap "
        "'no': a CPU rank without a spare core, whose step is compute + comm "
        "(atpsim/calibrate/measurements/description.py); wait: in the repetition measured, the time the "
        "computing thread of the most-waiting rank was runnable but off the CPU (Linux "
        "schedstat), '-' when not recorded.",
    ]
    return "\n".join(lines) + "\n"


def _table_row(r: CheckResult) -> str:
    wait = r.point.run_delay_s
    without = r.error_without_wait
    return (
        f"| {r.point.label} | {r.point.time_s * 1e3:.3f} | {r.predicted_s * 1e3:.3f} | "
        f"{r.rel_error:+.1%} | {r.compute_s * 1e3:.3f} | {r.comm_s * 1e3:.3f} | "
        f"{r.exposed_comm_s * 1e3:.3f} | {r.cpu_share:.2g} | {'yes' if r.overlap else 'no'} | "
        f"{'-' if wait is None else f'{wait * 1e3:.3f}'} | "
        f"{'-' if without is None else f'{without:+.1%}'} |"
    )


def _wait_lines(comparison: Comparison) -> list[str]:
    """A note on the run-queue waits inside the measured times, when they were recorded."""
    bound = comparison.median_abs_error_without_wait
    if bound is None:
        return []
    return [
        f"Measured less its run-queue wait (the time each computing thread was runnable but "
        f"held off the CPU by other programs on the host, or by the run's own ranks and "
        f"threads beyond the cores), the median |error| would be {bound:.1%}. That is a bound "
        "for a quiet host, not the verdict: part of the wait belongs to the run itself.",
        "",
    ]


def _optional(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _fit_lines(summary: Mapping[str, Any]) -> list[str]:
    """A bullet per fitted model of the fit summary (``fitted/fit.yaml``; none when empty)."""
    lines = []
    if "link" in summary:
        lines.append(_link_line(summary["link"], summary.get("ranks")))
    if "gemm" in summary:
        lines.append(_gemm_line(summary["gemm"]))
    if "memory_ops" in summary:
        lines.append(_memory_line(summary["memory_ops"]))
    return [*lines, ""] if lines else []


def _link_line(link: Mapping[str, Any], ranks: Any) -> str:
    return (
        f"- link ({link['algorithm']}, star of {ranks} ranks): "
        f"{link['bandwidth_Bps'] / 1e9:.4g} GB/s, {link['latency_s'] * 1e6:.4g} us per "
        f"transfer; RMS residual {link['rms_rel_error_all_points']:.1%} over "
        f"{link['points']} collectives"
    )


def _gemm_line(gemm: Mapping[str, Any]) -> str:
    return (
        f"- GEMMs ({gemm['dtype']}): peak {gemm['peak_flops'] / 1e9:.4g} GFLOP/s, "
        f"{gemm['launch_overhead_s'] * 1e6:.3g} us per call; RMS residual "
        f"{gemm['rms_rel_error_curve']:.1%} by the curve, {gemm['rms_rel_error_profile']:.1%} "
        f"with the measured points, over {gemm['points']} GEMMs; memory-bound ops at "
        f"{gemm['memory_bandwidth_Bps'] * gemm['memory_efficiency'] / 1e9:.4g} GB/s"
    )


def _memory_line(memory: Mapping[str, Any]) -> str:
    classes = ", ".join(
        f"{name} {c['effective_bandwidth_Bps'] / 1e9:.3g}"
        for name, c in (memory.get("classes") or {}).items()
    )
    return (
        f"- memory-bound ops fitted: {memory['effective_bandwidth_Bps'] / 1e9:.4g} GB/s over "
        f"{memory['points']} ops, RMS residual {memory['rms_rel_error']:.1%}"
        + (f"; per class (GB/s): {classes}" if classes else "")
    )
