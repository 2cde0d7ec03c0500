"""What a report does for each workload, registered by name (:data:`WORKLOADS`): one training
step of a tensor-parallel group (``step``) or one whole training iteration of a data x
pipeline x tensor-parallel job (``job``).

A table's workload comes from its columns (:func:`atpsim.results.schema.workload_of`), and
every choice the report makes between the two is a field of that workload's
:class:`Workload`: the page's TFLOP/s unit, the paper's claims, the key findings, the units
line, the sections between the claims and the raw rows, the raw rows themselves, and what a
table too large to show whole is summarized by. So the page (:mod:`atpsim.report.build`) and
the large table's summary (:mod:`atpsim.report.large`) never ask which workload they show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from atpsim.report import claims, findings, job_tables, sections, tables
from atpsim.report.document import Document, Table
from atpsim.results.schema import workload_of
from atpsim.scenario.report import Reference, ReportOptions

#: Writes a workload's sections into the page (document, report folder, results, the
#: scenario's report options, the page's TFLOP/s unit, the reference): the figures it saved.
Sections = Callable[[Document, Path, pd.DataFrame, ReportOptions, str, Reference | None], list[Path]]


@dataclass(frozen=True)
class Workload:
    """How the report shows one workload's table.

    *name*: the workload (``step`` | ``job``); *unit*: the page's TFLOP/s unit from the
    scenario's report options and reference; *verdicts*: the paper's claims as checked on the
    table; *findings*: the key findings, in page order; *units*: what the units line adds;
    *sections*: the page's body between the claims and the raw rows; *failures* and
    *all_rows*: the raw rows (the latter in the page's unit); *time*: the time column a large
    table is ranked by, and *front_by*: the columns within which its Pareto fronts are drawn.
    """

    name: str
    unit: Callable[[ReportOptions, Reference | None], str]
    verdicts: Callable[[pd.DataFrame, Reference | None], list[claims.Verdict]]
    findings: tuple[findings.Finding, ...]
    units: tuple[str, ...]
    sections: Sections
    failures: Callable[[pd.DataFrame], Table | None]
    all_rows: Callable[[pd.DataFrame, str], Table]
    time: str
    front_by: tuple[str, ...]


def step_unit(options: ReportOptions, reference: Reference | None) -> str:
    """The ``report.tflops_unit`` the scenario sets; else the paper's 2^40 where the scenario
    compares with the paper's Table 3 cells, else SI."""
    if "tflops_unit" in options.model_fields_set:
        return options.tflops_unit
    return "paper" if reference is not None and reference.cells() else "si"


def si_unit(options: ReportOptions, reference: Reference | None) -> str:
    """SI (10^12 FLOP/s), whatever the scenario says: a job table has no paper unit."""
    return "si"


def no_claims(frame: pd.DataFrame, reference: Reference | None) -> list[claims.Verdict]:
    """None: the paper makes no claim about a whole job."""
    return []


def job_rows(frame: pd.DataFrame, unit: str) -> Table:
    """Every point of a job table (:func:`atpsim.report.job_tables.all_rows`), uncaptioned
    (the section names it); TFLOP/s are SI whatever *unit*."""
    return replace(job_tables.all_rows(frame), caption="")


STEP = Workload(
    "step", step_unit, claims.verdicts, findings.STEP_FINDINGS, (), sections.step_sections,
    tables.failures, tables.all_rows, "step_time_s", ("model",),
)  # fmt: skip

JOB = Workload(
    "job", si_unit, no_claims, findings.JOB_FINDINGS, ("memory in GB = 10^9 B",),
    sections.job_sections, job_tables.failures, job_rows, "iteration_time_s",
    ("model", "global_batch"),
)  # fmt: skip

#: Every workload, by name (the names of :data:`atpsim.results.schema.SCHEMAS`).
WORKLOADS: dict[str, Workload] = {w.name: w for w in (STEP, JOB)}


def workload(table: pd.DataFrame | list[str]) -> Workload:
    """The :class:`Workload` of *table*, a results frame or its column names."""
    return WORKLOADS[workload_of(table)]
