"""Import a framework's description of a training run as a job scenario (issue 27).

:func:`import_job` reads a Megatron-LM command line, a NeMo recipe, a DeepSpeed config or a
Hugging Face ``config.json`` (:mod:`atpsim.importers`) and returns an
:class:`~atpsim.importers.trace.ImportedJob`: the scenario's values, each traced to the input
line it came from, and what was not carried over. :func:`imported_yaml` is its scenario file
(every value's origin a comment); ``atpsim run`` runs it.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from atpsim.errors import AtpsimError, did_you_mean
from atpsim.importers import describe_input, importer, importer_kinds
from atpsim.importers.common import ImportOptions
from atpsim.importers.trace import DEFAULT, OPTION, ImportedJob
from atpsim.importers.writer import scenario_yaml
from atpsim.scenario.loader import error_from_validation
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import expand_sweep

__all__ = ["ImportedJob", "ImportOptions", "check_imported", "import_job", "importer_kinds",
           "imported_yaml"]  # fmt: skip


def import_job(kind: str, path: str | Path, *, check: bool = True, **options: Any) -> ImportedJob:
    """The job scenario of the *kind* of input at *path* (``megatron``, ``nemo``,
    ``deepspeed``, ``hf``). *options* are :class:`ImportOptions`' fields (``topology``,
    ``gpus``, ``model``, ``tp``, ``pp``, ``micro_batch``, ``global_batch``, ``seq``,
    ``vocab``, ``name``, ``out_dir``); one a kind does not take (its input gives it) is
    refused by name. With *check*, the scenario is validated and its sweep expanded as
    ``atpsim run`` would (topology built, sizes checked): an error names the input line and
    flag the failing value came from."""
    function, accepted = importer(kind)
    names = {f.name for f in fields(ImportOptions)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise AtpsimError(f"unknown option {unknown[0]!r}{did_you_mean(unknown[0], names)}",
                          param=unknown[0])  # fmt: skip
    chosen = ImportOptions(**options)
    refused = [name for name in chosen.given() if name not in accepted]
    if refused:
        raise AtpsimError(f"does not apply to {describe_input(kind)}, which gives it itself",
                          param=refused[0])  # fmt: skip
    job: ImportedJob = function(path, chosen)
    if check:
        check_imported(job, chosen.out_dir or ".")
    return job


def imported_yaml(job: ImportedJob) -> str:
    """The scenario file of *job*: YAML, every value's origin a comment beside it."""
    return scenario_yaml(job)


def check_imported(job: ImportedJob, base_dir: str | Path = ".") -> None:
    """Validate *job*'s scenario and expand its sweep (as ``atpsim run`` does before running);
    an error is re-raised naming the input line and flag (or key) its value came from."""
    raw = job.scenario()
    try:
        scenario = Scenario.model_validate(raw, context={"base_dir": str(base_dir)})
        scenario._source = job.source
        scenario._raw = raw
        expand_sweep(scenario)
    except ValidationError as error:
        raise _traced(job, error_from_validation(error, raw, job.source)) from None
    except AtpsimError as error:
        raise _traced(job, error) from None


def _traced(job: ImportedJob, error: AtpsimError) -> AtpsimError:
    """*error* (about a scenario key) as an error about the input that set that key."""
    key = error.key or ""
    item = job.origin_of(key) if key else None
    if item is None:
        where = f" (scenario key {key})" if key else ""
        return AtpsimError(f"{error.message}{where}", source=job.source)
    written = next((o for o in item.origins if o.kind != DEFAULT), None)
    message = f"{error.message} (scenario key {key}: {item.comment()})"
    if written is not None and written.kind == OPTION:  # `tp=8`: the parameter tp
        return AtpsimError(message, source=job.source, param=written.text.strip("`").split("=")[0])
    source = (written.where if written else None) or job.source
    flag = written.text.split()[0] if written and written.text.strip() else key
    return AtpsimError(message, source=source, key=flag)
