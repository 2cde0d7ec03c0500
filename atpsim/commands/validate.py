"""`atpsim validate`: fit a machine's measurements, predict its layers, fail when off.

``atpsim validate DIR`` compares (fitting first when ``DIR/fitted/`` is missing, or with
``--refit``); ``--fit-only`` stops after the fit; ``atpsim validate LOG`` (a file) fits an
nccl-tests log alone and prints the link it implies; ``atpsim validate TRACE.json`` takes a
PyTorch profiler trace as measurements (per-op predicted vs measured, :mod:`._trace`). Exit 0
pass, 1 when the median |error| passes ``DIR/tolerance.yaml`` (a trace: ``--tolerance``), 2 on
bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from atpsim.api import (
    AtpsimError,
    Comparison,
    FolderFit,
    LinkFit,
    fit_folder,
    fit_nccl_log,
    validate,
)
from atpsim.commands._common import clean_errors, warnings_to_stderr
from atpsim.commands._trace import is_trace, trace_options, validate_trace_command


@click.command("validate")
@click.argument("path", type=click.Path(exists=True))
@click.option("--refit", is_flag=True, help="Fit again even when DIR/fitted/ exists.")
@click.option("--fit-only", is_flag=True, help="Fit and print the residuals; no comparison.")
@click.option(
    "--ranks", type=click.IntRange(min=2), default=None,
    help="Ranks of an nccl-tests LOG that does not say (default: the log's).",
)
@click.option("--placement", type=click.Choice(["out-of-place", "in-place"]),
              default="out-of-place", show_default=True, help="Columns of an nccl-tests LOG.")  # fmt: skip
@trace_options
@clean_errors
def command(path: str, refit: bool, fit_only: bool, ranks: int | None, placement: str,
            **trace: Any) -> None:  # fmt: skip
    """Fit DIR's collectives and GEMMs, predict its layers, and compare (or fit a LOG, or
    check a profiler TRACE.json)."""
    console = Console(width=120)
    if is_trace(path):
        validate_trace_command(console, path, refit or fit_only or ranks is not None
                               or placement != "out-of-place", **trace)  # fmt: skip
        return
    if any(value is not None for value in trace.values()):
        raise AtpsimError("--fitted, --profile, --layer and --tolerance apply to a profiler trace (.json)",
                          source=path)  # fmt: skip
    if Path(path).is_file():
        if refit or fit_only:
            raise AtpsimError("--refit and --fit-only apply to a folder, not a LOG file", source=path)
        _fit_log(console, path, ranks, placement)
        return
    if ranks is not None or placement != "out-of-place":
        raise AtpsimError("--ranks and --placement apply to an nccl-tests LOG file, not a folder",
                          source=path)  # fmt: skip
    with warnings_to_stderr():
        if fit_only:
            _print_fit(console, fit_folder(path))
            return
        result = validate(path, refit=refit)
    if result.comparison.fit is not None:
        _print_fit(console, result.comparison.fit)
    _print_comparison(console, result.comparison)
    console.print("saved " + ", ".join(str(p) for p in result.saved))
    if not result.passed:
        sys.exit(1)


def _fit_log(console: Console, path: str, ranks: int | None, placement: str) -> None:
    fitted = fit_nccl_log(path, ranks=ranks, placement=placement)
    for warning in fitted.log.warnings:
        click.echo(f"atpsim: warning: {path}: {warning}", err=True)
    fit, last = fitted.fit, fitted.log.rows[-1]
    click.echo(  # not rich: a long path must not wrap the numbers onto other lines
        f"{path}: {fit.residuals[0].sample.group_size} ranks, ring all-reduce: bandwidth "
        f"{fit.bandwidth_Bps / 1e9:.2f} GB/s (largest-message busbw "
        f"{last.busbw_Bps(placement) / 1e9:.2f} GB/s), latency {fit.latency_s * 1e6:.3f} us "
        f"per ring step; RMS error {fit.rms_rel_error():.1%}"
    )
    _print_link_residuals(console, fit)


def _print_fit(console: Console, fit: FolderFit) -> None:
    if fit.link is not None:
        link = fit.link
        console.print(
            f"link fit ({link.algorithm}, {fit.n_ranks} ranks): {link.bandwidth_Bps / 1e9:.4g} "
            f"GB/s, {link.latency_s * 1e6:.4g} us per transfer; RMS error "
            f"{link.rms_rel_error(('small', 'large', 'both')):.1%} on the fitted points, "
            f"{link.rms_rel_error():.1%} on all"
        )
        _print_link_residuals(console, link)
    if fit.profile is not None:
        profile = fit.profile.profile
        dtype = profile.gemm.points_dtype
        console.print(
            f"GEMM fit ({dtype}): peak {profile.peak_flops_for(dtype) / 1e9:.4g} GFLOP/s, "
            f"overhead {profile.launch_overhead_s * 1e6:.4g} us per call, efficiency_max "
            f"{profile.gemm.efficiency_max}, output_half_elements "
            f"{profile.gemm.output_half_elements:g}, k_half {profile.gemm.k_half:g}; RMS error "
            f"{fit.profile.rms_rel_error(curve=True):.1%} by the curve, "
            f"{fit.profile.rms_rel_error():.1%} with the measured points"
        )
    if fit.memory is not None:
        console.print(
            f"memory-bound ops: effective bandwidth {fit.memory.bandwidth_Bps / 1e9:.4g} GB/s "
            f"over {len(fit.memory.residuals)} ops; RMS error {fit.memory.rms_rel_error():.1%}"
        )
    console.print(f"wrote {fit.fitted_dir}/")


def _print_link_residuals(console: Console, link: LinkFit) -> None:
    table = Table(title="collective fit residuals")
    for name in ("point", "role", "measured us", "fitted us", "error"):
        table.add_column(name, justify="right")
    for r in link.residuals:
        table.add_row(r.sample.label, r.role, f"{r.sample.time_s * 1e6:.2f}",
                      f"{r.predicted_s * 1e6:.2f}", f"{r.rel_error:+.1%}")  # fmt: skip
    console.print(table)


def _print_comparison(console: Console, comparison: Comparison) -> None:
    table = Table(title=f"check points: {comparison.folder}")
    for name in ("layer", "measured ms", "predicted ms", "error", "compute ms", "comm ms",
                 "exposed ms"):  # fmt: skip
        table.add_column(name, justify="right")
    for r in comparison.results:
        table.add_row(r.point.label, f"{r.point.time_s * 1e3:.3f}", f"{r.predicted_s * 1e3:.3f}",
                      f"{r.rel_error:+.1%}", f"{r.compute_s * 1e3:.3f}", f"{r.comm_s * 1e3:.3f}",
                      f"{r.exposed_comm_s * 1e3:.3f}")  # fmt: skip
    console.print(table)
    worst = comparison.worst
    verdict = "PASS" if comparison.passed else "FAIL"
    console.print(
        f"{verdict}: median |error| {comparison.median_abs_error:.1%} (tolerance "
        f"{comparison.tolerance:.0%}), worst {worst.rel_error:+.1%} at {worst.point.label}"
    )
