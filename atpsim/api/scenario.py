"""`atpsim.run_scenario`: a scenario file to a run folder. Load and expand the scenario, run
its sweep (every point through its workload's simulation, :data:`atpsim.api.workloads.
WORKLOADS`: :func:`atpsim.api.point.simulate_point` for a step,
:func:`atpsim.api.job_point.simulate_job_point` for a job), copy the scenario beside the
results and build the report; :func:`rebuild_report` redoes the last part from a
saved folder.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.console import Console

from atpsim.api.point_trace import write_point_traces
from atpsim.api.uncertainty import Draws, simulate_with_draws, with_draws
from atpsim.api.workloads import WORKLOADS
from atpsim.errors import AtpsimError, param
from atpsim.report import job_tables, large
from atpsim.report.answer import answer_lines
from atpsim.report.build import SCENARIO_COPY
from atpsim.report.build import rebuild_report as _rebuild_report
from atpsim.report.index import run_page
from atpsim.results.io import RESULTS_CSV, read_results
from atpsim.results.schema import JOB, workload_of
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import SweepPoints, describe_sweep, expand_sweep
from atpsim.sweep.estimate import long_sweep_warning
from atpsim.sweep.lock import folder_lock
from atpsim.sweep.owner import check_owner
from atpsim.sweep.runner import Simulate, SweepInterrupted, check_jobs, stream_sweep
from atpsim.sweep.table import SweepTable
from atpsim.yamlfile import load_yaml

__all__ = ["RunSummary", "SweepInterrupted", "SweepPoints", "expand_sweep", "load_scenario",
           "rebuild_report", "run_scenario"]

log = logging.getLogger(__name__)

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class RunSummary:
    """What a run wrote: the run folder, its table (counted as written; :attr:`frame` reads
    it, all of it, when asked), the files, and the failures."""

    out_dir: Path
    table: SweepTable
    files: list[Path] = field(default_factory=list)

    @cached_property
    def frame(self) -> pd.DataFrame:
        return read_results(self.table.path)

    @property
    def n_points(self) -> int:
        return self.table.n_points

    @property
    def n_failed(self) -> int:
        return self.table.n_failed

    def answers(self) -> list[str]:
        """What the run found, as its report's first screen says it: the key findings (points,
        failures, the fastest configuration per machine and model, the paper's claims that
        hold) and, for a job sweep, one verdict per comparison (does ATP's best 2D mesh beat
        Megatron-LM's best 1D TP, and by how much). Computed from the results, as the page."""
        page = run_page(self.out_dir)
        if large.is_large(self.out_dir) or workload_of(list(self.frame.columns)) != JOB:
            return list(page.findings)
        return [*page.findings, *job_tables.verdicts(self.frame)]

    def answer(self) -> list[str]:
        """The report's answer (:mod:`atpsim.report.answer`) as lines: which layout is fastest
        per case and by how much; empty for a table too large to read whole."""
        if large.is_large(self.out_dir):
            return []
        kind = "job" if workload_of(list(self.frame.columns)) == JOB else "step"
        return answer_lines(self.frame, kind)

    def missing_feature(self) -> str | None:
        """The error, when every point failed because the simulator lacks a feature."""
        errors = self.table.errors
        if self.n_points and self.n_failed == self.n_points and len(errors) == 1:
            return errors[0] if NOT_IMPLEMENTED in errors[0] else None
        return None


def default_out_dir(name: str) -> Path:
    """``reports/<scenario name>/`` (relative to the working directory)."""
    return Path("reports") / name


def run_scenario(
    path: Path | str,
    out_dir: Path | str | None = None,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    fresh: bool = False,
    progress: bool = True,
    console: Console | None = None,
    simulate: Simulate | None = None,
    announce: Callable[[str], None] = log.info,
    trace: Sequence[str] = (),
    uncertainty: int | None = None,
    seed: int | None = None,
) -> RunSummary:
    """Run the scenario in *path* into *out_dir* (default ``reports/<name>/``): results.csv
    (+ .parquet), scenario.yaml, report.md, report.html and figures/. *announce* receives the
    sweep's description before it runs. *scheduler* sends the points to a Dask cluster:
    ``local`` (*jobs* worker processes on this machine) or a scheduler's address such as
    ``tcp://host:8786`` (:func:`atpsim.sweep.runner.stream_sweep`). Raises ScenarioError for a
    bad scenario (before simulating anything), AtpsimError for a scheduler that does not
    answer, OutputLockedError while another run writes *out_dir*, and SweepInterrupted on
    Ctrl-C. An interrupted run's partial rows are kept (*resume*) or set aside (*fresh*);
    with neither, the run is refused rather than lose them. *trace* selectors
    (:mod:`atpsim.api.point_trace`, checked before simulating) write the chosen points'
    timelines to ``<out>/traces/<point_key>.json``. *uncertainty* = N (and *seed*) set or
    replace the scenario's ``uncertainty`` draws (:mod:`atpsim.api.uncertainty`)."""
    check_jobs(jobs, scheduler)
    scenario = load_scenario(path, expand=False)
    points: Collection[Any] = SweepPoints(scenario)  # expanded lazily: len() checks them all
    workload = WORKLOADS[scenario.workload]
    selections = workload.select_traces(list(points) if trace else [], trace)
    out = Path(out_dir) if out_dir is not None else default_out_dir(scenario.name)
    draws = scenario_draws(scenario, uncertainty, seed)
    check_owner(out, "run", scenario.name, fresh)
    announce(describe_sweep(scenario, points))
    warning = long_sweep_warning(points, jobs, copies=1 + (draws.n if draws else 0))
    if warning:
        log.warning(warning)
    workload.warn(points)
    default: Simulate = workload.simulate
    if draws is not None:
        points, default = with_draws(list(points), draws), simulate_with_draws
    with folder_lock(out):
        table = stream_sweep(points, out, jobs=jobs, scheduler=scheduler, resume=resume,
                             fresh=fresh, simulate=simulate or default, progress=progress,
                             console=console, parquet="parquet" in scenario.output.formats)
        _copy_scenario(Path(path), out / SCENARIO_COPY, scenario.name)
        summary = RunSummary(out, table, [table.path, *_rebuild_report(out)])
        if selections:
            summary.files += write_point_traces(out, summary.frame, list(points), selections)
    return summary


def _copy_scenario(path: Path, copy: Path, name: str) -> None:
    """Keep the scenario as run beside its results (nothing to do when *path* is that copy:
    ``atpsim run out/scenario.yaml -o out`` reruns a run). A scenario without ``name`` is
    named by its file's stem (*name*); its copy says so (:func:`named_copy`), so the copy
    owns the folder under that name and reruns into it (:func:`check_owner`)."""
    if copy.exists() and path.resolve() == copy.resolve():
        return
    text = path.read_text(encoding="utf-8")
    data = load_yaml(text, str(path))
    if isinstance(data, dict) and "name" not in data:
        copy.write_text(named_copy(text, data, name), encoding="utf-8")
    else:
        shutil.copyfile(path, copy)


def named_copy(text: str, data: dict[str, Any], name: str) -> str:
    """The scenario *text* (parsed: *data*, a mapping without ``name``) with ``name: <name>``
    added: as a last line, comments and layout kept, where that parses to *data* and the
    name (a block mapping); else *data* written again, the name first (a flow mapping)."""
    line = yaml.safe_dump({"name": name}, default_flow_style=False, allow_unicode=True)
    ending = "" if not text or text.endswith("\n") else "\n"
    added = f"{text}{ending}# added by atpsim run: the scenario file's stem (it names none)\n{line}"
    try:
        if load_yaml(added, "the scenario copy") == {**data, "name": name}:
            return added
    except AtpsimError:
        pass
    return yaml.safe_dump({"name": name, **data}, sort_keys=False, allow_unicode=True)


def scenario_draws(scenario: Scenario, n: int | None, seed: int | None) -> Draws | None:
    """The parameter draws of a run: *n* (``uncertainty``) and *seed* where given, else the
    scenario's ``uncertainty`` key; None for none (either workload takes them)."""
    own = scenario.uncertainty
    if n is None and own is None:
        if seed is not None:
            raise AtpsimError(f"a seed draws nothing without {param('uncertainty')} N (or the "
                              "scenario's uncertainty key)", param="seed")  # fmt: skip
        return None
    base_seed = own.seed if own is not None else 0
    return Draws(n if n is not None else own.draws if own is not None else 0,
                 base_seed if seed is None else seed)  # fmt: skip


def rebuild_report(out_dir: Path | str) -> list[Path]:
    """Rebuild the report of the run folder *out_dir* from its results.csv and scenario.yaml,
    holding the folder's lock (so it cannot interleave with a run writing there)."""
    if not (Path(out_dir) / RESULTS_CSV).is_file():
        return _rebuild_report(out_dir)  # its own error names the missing folder or table
    with folder_lock(out_dir):
        return _rebuild_report(out_dir)
