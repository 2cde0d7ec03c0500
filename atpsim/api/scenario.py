"""`atpsim.run_scenario`: a scenario file to a run folder. Load and expand the scenario, run
its sweep (every point through :func:`atpsim.api.point.simulate_point`), copy the scenario
beside the results and build the report; :func:`rebuild_report` redoes the last part from a
saved folder.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from rich.console import Console

from atpsim.api.point import simulate_point
from atpsim.report.build import SCENARIO_COPY, build_report, rebuild_report
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import describe_sweep, expand_sweep
from atpsim.sweep.runner import Simulate, SweepInterrupted, run_sweep

__all__ = ["RunSummary", "SweepInterrupted", "expand_sweep", "load_scenario", "rebuild_report",
           "run_scenario"]

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
    simulate: Simulate | None = None,
    announce: Callable[[str], None] = log.info,
) -> RunSummary:
    """Run the scenario in *path* into *out_dir* (default ``reports/<name>/``): results.csv
    (+ .parquet), scenario.yaml, report.md, report.html and figures/. *announce* receives the
    sweep's description before it runs. Raises ScenarioError for a bad scenario (before
    simulating anything) and SweepInterrupted on Ctrl-C."""
    scenario = load_scenario(path, expand=False)
    points = expand_sweep(scenario)
    out = Path(out_dir) if out_dir is not None else default_out_dir(scenario.name)
    announce(describe_sweep(scenario, points))
    parquet = "parquet" in scenario.output.formats
    frame = run_sweep(
        points,
        out,
        jobs=jobs,
        resume=resume,
        simulate=simulate or simulate_point,
        progress=progress,
        console=console,
        parquet=parquet,
    )
    shutil.copyfile(path, out / SCENARIO_COPY)
    text = (out / SCENARIO_COPY).read_text(encoding="utf-8")
    files = [out / "results.csv", *build_report(out, frame, text)]
    return RunSummary(out, frame, files)
