"""Write a fit into the data files: the fitted lines of ``presets.yaml`` (ic1-ic4) and of the
paper-stack hardware profile, and the fit's record (:mod:`atpsim.calibrate.paper.record`).

The YAML files stay hand-written: the fit rewrites only the value and comment of the lines it
owns, found by key inside their preset's block, so every other line and comment survives. Each
rewritten line says where its value came from, its residual, and the spec it replaces.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from atpsim.calibrate.paper import parameters as params
from atpsim.calibrate.paper.fit import group_rms
from atpsim.calibrate.paper.record import write_record
from atpsim.errors import AtpsimError

if TYPE_CHECKING:
    from atpsim.calibrate.paper.fit import FitResult

FITTED = (
    "fitted by python -m atpsim.calibrate.paper to Table 3 M2/M3 baselines "
    "(+ IC1 Section 5.3 calibration)"
)
MEASURED = "from the NCCL all-reduce sweep (atpsim.calibrate.fit.nccl_overhead), not fitted"
GB = 1e9


def data_path(*parts: str) -> Path:
    """A file of the installed ``atpsim`` package (the working tree in an editable install)."""
    return Path(str(resources.files("atpsim").joinpath(*parts)))


def set_line(text: str, block: str | None, key: str, value: str, comment: str) -> str:
    """Replace the value and comment of the first ``key:`` line inside top-level *block* (the
    whole file when None); an error naming the block and key if there is none."""
    start, end = _block_span(text, block)
    pattern = re.compile(rf"^([ ]*{re.escape(key)}:)[^\n]*$", re.MULTILINE)
    match = pattern.search(text, start, end)
    if match is None:
        raise AtpsimError(f"no line '{key}:' to write the fitted value into", key=block or key)
    line = f"{match.group(1)} {value}  # {comment}"
    return text[: match.start()] + line + text[match.end() :]


def _block_span(text: str, block: str | None) -> tuple[int, int]:
    if block is None:
        return 0, len(text)
    head = re.search(rf"^{re.escape(block)}:\s*$", text, re.MULTILINE)
    if head is None:
        raise AtpsimError(f"no top-level entry {block!r}", key=block)
    following = re.search(r"^\S", text[head.end() :], re.MULTILINE)
    return head.end(), head.end() + following.start() if following else len(text)


def preset_lines(result: FitResult) -> list[tuple[str, str, str, str]]:
    """(preset, key, value text, comment) of every preset line the fit writes."""
    values = result.fit.values
    lines = []
    for p in params.PARAMETERS:
        if p.topology is None:
            continue
        spec = "none" if p.spec is None else f"{p.spec / GB:g} GB/s"
        residual = group_rms(result.fit, p.topology)
        comment = f"{FITTED}; residual {residual:.1%} (RMS, {p.topology}){_sigma(result, p.name)}; spec {spec}"
        lines.append((p.topology, p.key, f"{values[p.name] / GB:.5g} GB/s", comment))
    return lines


def profile_lines(result: FitResult) -> list[tuple[str, str, str]]:
    """(key, value text, comment) of every profile line the fit writes."""
    measured = params.measured_collective()
    spec = {p.name: p.spec for p in params.PARAMETERS}
    fitted = f"{FITTED}; residual {result.fit.rms():.1%} (RMS, fit set)"
    values = result.fit.values
    return [
        (
            "efficiency_max",
            f"{values['gemm_efficiency_max']:.5g}",
            f"{fitted}{_sigma(result, 'gemm_efficiency_max')}; spec {spec['gemm_efficiency_max']:g}",
        ),
        (
            "layer_overhead_s",
            f"{values['layer_overhead_s']:.4g}",
            f"{fitted}{_sigma(result, 'layer_overhead_s')}; spec {spec['layer_overhead_s']:g}",
        ),
        ("collective_overhead_s", f"{measured.overhead_s:.4g}",
         f"{MEASURED}; charged by the event backend only (the default nccl backend charges "
         f"NCCL's latency model); spec 0"),
    ]


def _sigma(result: FitResult, name: str) -> str:
    """``; 1-sigma x%`` of parameter *name* relative to its value, or ''."""
    record = getattr(result, "uncertainty", None)
    if record is None:
        return ""
    p = record.parameter(name)
    relative = p.sigma if p.space == "log" else p.sigma / result.fit.values[name]
    return f"; 1-sigma {relative:.1%}"


def write_all(result: FitResult) -> list[Path]:
    """Write presets.yaml, the paper-stack profile and the record; return the paths."""
    presets = data_path("data", "presets.yaml")
    text = presets.read_text()
    for block, key, value, comment in preset_lines(result):
        text = set_line(text, block, key, value, comment)
    presets.write_text(text)
    profile = data_path("data", "hardware", f"{params.PAPER_STACK_PROFILE}.yaml")
    text = profile.read_text()
    for key, value, comment in profile_lines(result):
        text = set_line(text, None, key, value, comment)
    profile.write_text(text)
    return [presets, profile, write_record(result)]
