"""A scenario file to a run folder: load and expand the scenario, run its sweep, copy the
scenario beside the results and build the report (what ``atpsim run`` does).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from rich.console import Console

from atpsim.report.build import SCENARIO_COPY, build_report
from atpsim.report.chunk_table import reference_cells
from atpsim.report.options import ReportOptions
from atpsim.sweep.runner import Simulate, default_simulate, run_sweep

log = logging.getLogger(__name__)

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class RunSummary:
    """What a run wrote: the run folder, its table, the files, and the failures."""

    out_dir: Path
    frame: pd.DataFrame
    files: list[Path] = field(default_factory=list)

    @property
    def n_points(self) -> int:
        return len(self.frame)

    @property
    def n_failed(self) -> int:
        return int((self.frame["status"] == "failed").sum())

    def missing_feature(self) -> str | None:
        """The error, when every point failed because the simulator lacks a feature."""
        errors = set(self.frame["error"].dropna())
        if self.n_points and self.n_failed == self.n_points and len(errors) == 1:
            error = errors.pop()
            return error if NOT_IMPLEMENTED in error else None
        return None


def default_out_dir(name: str) -> Path:
    """``reports/<scenario name>/`` (relative to the working directory)."""
    return Path("reports") / name


def run_scenario(
    path: Path | str,
    out_dir: Path | str | None = None,
    *,
    jobs: int = 1,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
    simulate: Simulate = default_simulate,
    announce: Callable[[str], None] = log.info,
) -> RunSummary:
    """Run the scenario in *path* into *out_dir* (default ``reports/<name>/``): results.csv
    (+ .parquet), scenario.yaml, report.md, report.html and figures/. *announce* receives the
    sweep's description before it runs. Raises ScenarioError for a bad scenario (before
    simulating anything) and SweepInterrupted on Ctrl-C."""
    from atpsim.scenario.loader import load_scenario
    from atpsim.scenario.sweep import describe_sweep, expand_sweep

    scenario = load_scenario(path, expand=False)
    points = expand_sweep(scenario)
    ReportOptions.from_mapping(scenario.report, scenario.source)
    reference_cells(scenario.reference, scenario.source)
    out = Path(out_dir) if out_dir is not None else default_out_dir(scenario.name)
    announce(describe_sweep(scenario, points))
    parquet = "parquet" in scenario.output.formats
    frame = run_sweep(
        points,
        out,
        jobs=jobs,
        resume=resume,
        simulate=simulate,
        progress=progress,
        console=console,
        parquet=parquet,
    )
    shutil.copyfile(path, out / SCENARIO_COPY)
    text = (out / SCENARIO_COPY).read_text(encoding="utf-8")
    files = [out / "results.csv", *build_report(out, frame, text)]
    return RunSummary(out, frame, files)
