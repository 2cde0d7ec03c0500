"""The public API: the one place the stages are chained, and the one thing the command line,
the validation harness and the benchmarks import from the package.

Each entry point takes plain values (names, sizes, tuples) or the package's own types and
returns a typed result:

- :func:`simulate` one training step of a model on a mesh -> :class:`StepPrediction`
- :func:`collective` an nccl-tests-style sweep of one collective -> :class:`CollectiveSweep`
- :func:`plan` every mesh and chunk count ranked -> :class:`Plan`
- :func:`simulate_job` one iteration of a DP x PP x TP job -> :class:`JobPrediction`;
  :func:`plan_job` every such layout that divides the model and fits, ranked -> :class:`JobPlan`
- :func:`run_search` the whole-job layouts of a design space (:func:`search_space`), pruned,
  simulated on the sweep's executors -> :class:`SearchResult`
- :func:`run_scenario` a scenario file's sweep, results table and report -> :class:`RunSummary`
  (a job scenario's points through :func:`simulate_job_point`)
- :func:`rebuild_report` a report from a saved results table
- :func:`load_topology`, :func:`topology_summary`, :func:`route`, :func:`hcm` the link graph
- :func:`validate` / :func:`fit_nccl_log` calibrate against measurements
- :func:`compile_joint_loop` compile the joint run's event loop and task clock now (cached on disk)
- :func:`machine_provenance` the machine a run ran as (hardware, NCCL, NIC, PCIe), each part
  measured, fitted, derived, spec or given -> :class:`MachineProvenance` (``.line()``)

Names are resolved on first use (PEP 562), so ``import atpsim.api`` costs nothing until a
function is called: ``atpsim topo show`` does not pay for pandas and matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> submodule of atpsim.api that defines (or re-exports) it, or, where dotted, of
#: atpsim (``training.job``: the workload layer's own module).
_EXPORTS: dict[str, str] = {
    # one step
    "simulate": "step",
    "StepPrediction": "step",
    "write_trace": "step",
    "simulate_point": "point",
    "topology_for": "point",
    "hardware_profile": "point",
    "serial_compute_time_s": "point",
    # a whole training job
    "simulate_job": "job_trace",
    "trace_job": "job_trace",
    "JobPrediction": "training.job",
    "JobConfig": "training.config",
    "JOB_DEFAULTS": "training.defaults",
    "job_default": "training.defaults",
    "preset_vocab": "training.defaults",
    "simulate_job_point": "job_point",
    "plan_job": "training.layouts",
    "simulate_jobs": "training.fabric",
    "compile_joint_loop": "engine.joint.engine",
    "compare_plain": "training.plain",
    "SharedFabric": "training.fabric",
    "Perturbation": "training.perturb",
    "write_job_links": "job_links",
    "LinkUse": "training.links",
    "JobPlan": "training.layouts",
    "JobCandidate": "training.layouts",
    "run_search": "search",
    "search_space": "search",
    "SearchResult": "search",
    "SweepPoints": "scenario",
    # collectives
    "collective": "collective_sweep",
    "CollectiveSweep": "collective_sweep",
    "CollectiveRow": "collective_sweep",
    # plans
    "plan": "planner",
    "Plan": "planner",
    "PlanEntry": "planner",
    "CALIBRATIONS": "planner",
    # scenarios and reports
    "run_scenario": "scenario",
    "rebuild_report": "scenario",
    "build_index": "reports",
    "first_screen": "reports",
    "RunSummary": "scenario",
    "SweepInterrupted": "scenario",
    "load_scenario": "scenario",
    "expand_sweep": "scenario",
    # a framework's run description as a job scenario
    "import_job": "importer",
    "imported_yaml": "importer",
    "check_imported": "importer",
    "importer_kinds": "importer",
    "ImportedJob": "importer",
    "ImportOptions": "importer",
    # topology
    "load_topology": "topology",
    "topology_summary": "topology",
    "route": "topology",
    "hcm": "topology",
    "format_hcm": "topology",
    "hcm_as_dict": "topology",
    "Topology": "topology",
    "Builder": "topology",
    "builders": "topology",
    "presets": "topology",
    "draw_topology": "topology",
    "format_bandwidth": "topology",
    "parse_bandwidth": "topology",
    "format_time": "topology",
    # calibration against measurements
    "validate": "calibrate",
    "Validation": "calibrate",
    "fit_folder": "calibrate",
    "FolderFit": "calibrate",
    "fit_nccl_log": "calibrate",
    "NcclLogFit": "calibrate",
    "LinkFit": "calibrate",
    "Comparison": "calibrate",
    "validate_trace": "calibrate",
    "TraceComparison": "calibrate",
    # what a run's machine is, and how each part came to be
    "machine_provenance": "calibrate.provenance",
    "MachineProvenance": "calibrate.provenance",
    "MachinePart": "calibrate.provenance",
    # types and helpers the validation harness builds programs with
    "ModelConfig": "harness",
    "model_preset": "harness",
    "DeviceMesh": "harness",
    "factorizations": "harness",
    "build_step_program": "harness",
    "layer_dims": "harness",
    "LayerDims": "harness",
    "memory_op_class": "harness",
    "bus_factor": "harness",
    "build_schedule": "harness",
    "run_collective": "harness",
    # errors
    "AtpsimError": "errors",
    "SimulationError": "errors",
    "SizeLimitError": "errors",
    "WorkerDiedError": "errors",
    "OutputLockedError": "errors",
    "EXIT_CODES": "errors",
    "describe_os_error": "errors",
    "source_date_epoch": "errors",
    "MEMORY_SHARE": "errors",
    "machine_memory_bytes": "errors",
    "env_limit": "errors",
    "show_params": "errors",
    "check_number": "errors",
}

__all__ = [
    "AtpsimError",
    "Builder",
    "CALIBRATIONS",
    "CollectiveRow",
    "CollectiveSweep",
    "Comparison",
    "DeviceMesh",
    "EXIT_CODES",
    "MEMORY_SHARE",
    "FolderFit",
    "ImportedJob",
    "ImportOptions",
    "JobCandidate",
    "SearchResult",
    "SweepPoints",
    "JobConfig",
    "JOB_DEFAULTS",
    "job_default",
    "preset_vocab",
    "JobPlan",
    "JobPrediction",
    "LayerDims",
    "LinkUse",
    "MachinePart",
    "MachineProvenance",
    "Perturbation",
    "SharedFabric",
    "LinkFit",
    "ModelConfig",
    "NcclLogFit",
    "OutputLockedError",
    "Plan",
    "PlanEntry",
    "RunSummary",
    "SimulationError",
    "SizeLimitError",
    "StepPrediction",
    "SweepInterrupted",
    "Topology",
    "TraceComparison",
    "Validation",
    "WorkerDiedError",
    "build_schedule",
    "build_step_program",
    "build_index",
    "first_screen",
    "builders",
    "bus_factor",
    "collective",
    "describe_os_error",
    "machine_memory_bytes",
    "machine_provenance",
    "env_limit",
    "draw_topology",
    "expand_sweep",
    "factorizations",
    "fit_folder",
    "fit_nccl_log",
    "format_bandwidth",
    "parse_bandwidth",
    "format_hcm",
    "format_time",
    "hardware_profile",
    "hcm",
    "hcm_as_dict",
    "import_job",
    "imported_yaml",
    "check_imported",
    "importer_kinds",
    "layer_dims",
    "load_scenario",
    "load_topology",
    "memory_op_class",
    "model_preset",
    "plan",
    "plan_job",
    "presets",
    "rebuild_report",
    "route",
    "run_collective",
    "run_scenario",
    "run_search",
    "search_space",
    "serial_compute_time_s",
    "simulate",
    "simulate_job",
    "simulate_jobs",
    "compile_joint_loop",
    "compare_plain",
    "write_job_links",
    "simulate_job_point",
    "simulate_point",
    "source_date_epoch",
    "show_params",
    "check_number",
    "topology_for",
    "topology_summary",
    "trace_job",
    "validate",
    "validate_trace",
    "write_trace",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'atpsim.api' has no attribute {name!r}")
    package = "atpsim" if "." in module else "atpsim.api"
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from atpsim.api.calibrate import (
        Comparison,
        FolderFit,
        LinkFit,
        NcclLogFit,
        TraceComparison,
        Validation,
        fit_folder,
        fit_nccl_log,
        validate,
        validate_trace,
    )
    from atpsim.api.collective_sweep import CollectiveRow, CollectiveSweep, collective
    from atpsim.api.errors import (
        EXIT_CODES,
        MEMORY_SHARE,
        AtpsimError,
        OutputLockedError,
        SimulationError,
        SizeLimitError,
        WorkerDiedError,
        check_number,
        describe_os_error,
        env_limit,
        machine_memory_bytes,
        show_params,
        source_date_epoch,
    )
    from atpsim.api.harness import (
        DeviceMesh,
        LayerDims,
        ModelConfig,
        build_schedule,
        build_step_program,
        bus_factor,
        factorizations,
        layer_dims,
        memory_op_class,
        model_preset,
        run_collective,
    )
    from atpsim.api.importer import (
        ImportedJob,
        ImportOptions,
        check_imported,
        import_job,
        imported_yaml,
        importer_kinds,
    )
    from atpsim.api.job_links import write_job_links
    from atpsim.api.job_point import simulate_job_point
    from atpsim.api.job_trace import simulate_job, trace_job
    from atpsim.api.planner import CALIBRATIONS, Plan, PlanEntry, plan
    from atpsim.api.point import (
        hardware_profile,
        serial_compute_time_s,
        simulate_point,
        topology_for,
    )
    from atpsim.api.reports import build_index
    from atpsim.api.scenario import (
        RunSummary,
        SweepInterrupted,
        SweepPoints,
        expand_sweep,
        load_scenario,
        rebuild_report,
        run_scenario,
    )
    from atpsim.api.search import SearchResult, run_search, search_space
    from atpsim.api.step import StepPrediction, simulate, write_trace
    from atpsim.api.topology import (
        Builder,
        Topology,
        builders,
        draw_topology,
        format_bandwidth,
        format_hcm,
        format_time,
        hcm,
        hcm_as_dict,
        load_topology,
        parse_bandwidth,
        presets,
        route,
        topology_summary,
    )
    from atpsim.calibrate.provenance import MachinePart, MachineProvenance, machine_provenance
    from atpsim.engine.joint.engine import compile_joint_loop
    from atpsim.training.config import JobConfig
    from atpsim.training.defaults import JOB_DEFAULTS, job_default, preset_vocab
    from atpsim.training.fabric import SharedFabric, simulate_jobs
    from atpsim.training.job import JobPrediction
    from atpsim.training.layouts import JobCandidate, JobPlan, plan_job
    from atpsim.training.links import LinkUse
    from atpsim.training.perturb import Perturbation
    from atpsim.training.plain import compare_plain
