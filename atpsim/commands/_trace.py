"""``atpsim validate TRACE.json``: a PyTorch profiler trace's ops, predicted vs measured."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from atpsim.api import AtpsimError, TraceComparison, validate_trace


def is_trace(path: str) -> bool:
    """A ``.json`` / ``.json.gz`` file, or a file whose text starts with ``{``: a trace."""
    target = Path(path)
    if not target.is_file():
        return False
    if target.name.endswith((".json", ".json.gz", ".gz")):
        return True
    with target.open("rb") as handle:
        return handle.read(64).lstrip()[:1] == b"{"


def trace_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that apply to a trace only."""
    options = [
        click.option("--fitted", type=click.Path(exists=True, file_okay=False), default=None,
                     help="A TRACE: predict with this measurements folder's fit (a blind check) "
                     "instead of fitting the trace's own ops."),
        click.option("--profile", default=None, metavar="NAME|FILE",
                     help="A TRACE: predict with this hardware profile (e.g. h100-sxm: a blind "
                     "check of what atpsim ships) instead of fitting the trace's own ops."),
        click.option("--layer", default=None, metavar="KEY=VALUE,...",
                     help="A TRACE made elsewhere: the layer it profiled, e.g. hidden=256,"
                     "heads=8,batch=4,seq=128,mesh=1x2,chunks=1,dtype=fp32."),
        click.option("--tolerance", type=click.FloatRange(min=0), default=None,
                     help="A TRACE: exit 1 when the median per-op |error| passes this (0.25 = 25%)."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def validate_trace_command(console: Console, path: str, folder_options: bool, fitted: str | None,
                           profile: str | None, layer: str | None,
                           tolerance: float | None) -> None:  # fmt: skip
    """Print the per-op table and the step check; exit 1 past *tolerance*."""
    if folder_options:
        raise AtpsimError("--refit, --fit-only, --ranks and --placement do not apply to a trace",
                          source=path)  # fmt: skip
    if tolerance is not None and not math.isfinite(tolerance):  # nan printed FAIL and exited 0
        raise AtpsimError(f"expected a finite fraction such as 0.25, got {tolerance}", key="--tolerance")
    result = validate_trace(path, fitted=fitted, layer=layer, profile=profile)
    _print_ops(console, result)
    for line in summary_lines(result):
        console.print(line, soft_wrap=True)
    median = result.median_abs_error()
    if tolerance is not None and median is not None:
        verdict = "PASS" if median <= tolerance else "FAIL"
        console.print(f"{verdict}: median per-op |error| {median:.1%} (tolerance {tolerance:.0%})")
        if median > tolerance:
            sys.exit(1)


def _print_ops(console: Console, result: TraceComparison) -> None:
    table = Table(title=f"{result.path.name}: {result.layer.describe()}, {result.source}")
    for name in ("op (program)", "kind", "n", "measured us", "predicted us", "error", "trace ops"):
        table.add_column(name, justify="left" if name in ("op (program)", "trace ops") else "right")
    for op in result.ops:
        error = op.rel_error
        table.add_row(op.key, op.kind, str(op.instances), f"{op.measured_s * 1e6:.1f}",
                      "-" if op.predicted_s is None else f"{op.predicted_s * 1e6:.1f}",
                      "-" if error is None else f"{error:+.1%}", ", ".join(op.trace_names[:4])
                      + (", ..." if len(op.trace_names) > 4 else ""))  # fmt: skip
    console.print(table)


def summary_lines(result: TraceComparison) -> list[str]:
    """Median |error| per kind, the step check, and what the mapping left out."""
    parts = []
    for kind in ("gemm", "memory", "comm"):
        median = result.median_abs_error(kind)
        parts.append(f"{kind} {'-' if median is None else f'{median:.1%}'}")
    lines = [f"median |error| by kind: {', '.join(parts)}"]
    step = f"step (median of {result.mapping.steps} ProfilerSteps): measured " \
        f"{result.step_measured_s * 1e3:.3f} ms"
    error = result.step_error
    if result.step_predicted_s is None or error is None:
        lines.append(f"{step}; not predicted (no link: the collectives have one message size)")
    else:
        lines.append(f"{step}, simulated {result.step_predicted_s * 1e3:.3f} ms ({error:+.1%})")
    left = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in sorted(result.mapping.unattributed_s.items()))
    lines.append(f"trace time matching no program op (all steps): {left or 'none'}")
    if result.mapping.missing:
        lines.append(f"program ops not found in the trace: {', '.join(result.mapping.missing)}")
    return lines
