"""Whose results a folder holds: a run or a search writes only over its own.

A finished sweep's folder holds ``results.csv`` beside the copy of what produced it:
``scenario.yaml`` for ``atpsim run``, ``search.yaml`` for ``atpsim search``. Rerunning the
same scenario (by its ``name``) into its folder regenerates it, as ``atpsim run
scenarios/fig12.yaml`` regenerates ``reports/fig12/``; another scenario's or the other
command's results are not replaced without ``--fresh``: a mistyped ``-o`` must not wipe a
finished sweep. A search made or changed by options is named by a hash of them
(:func:`atpsim.api.search.search_space`), so another search's options do not own its folder.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from atpsim.errors import AtpsimError, param
from atpsim.results.io import iter_rows

#: The copy each command keeps beside its results.
COPIES = {"run": "scenario.yaml", "search": "search.yaml"}
RESULTS = "results.csv"


def check_owner(out: Path, command: str, name: str, fresh: bool) -> None:
    """Refuse (AtpsimError at ``-o``) to write *command*'s sweep *name* into *out* when *out*
    holds the finished results of another scenario or of the other command, unless *fresh*."""
    if fresh or not (out / RESULTS).is_file():
        return
    for other, copy in COPIES.items():
        path = out / copy
        if not path.is_file():
            continue
        held = _name_in(path)
        if other != command or held != name:
            what = f"the results of {other} {held!r}" if held else f"the results of an {other}"
            again = f"the {other} that wrote them continues there with {param('resume', True)}; " \
                if other == command == "search" else ""
            raise AtpsimError(f"{out} holds {what}; expected an empty folder or one of {command} "
                              f"{name!r} ({again}give another {param('out_dir')}, or "
                              f"{param('fresh', True)} to replace them)", param="out_dir")  # fmt: skip


def _name_in(path: Path) -> str:
    """The ``name`` of the scenario copy at *path* ('' where it cannot be read); for a copy
    that names none, the name its results were written under (:func:`_results_name`)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, yaml.YAMLError):
        return ""
    if isinstance(data, dict) and "name" not in data:
        return _results_name(path.parent / RESULTS)
    return str(data.get("name", "")) if isinstance(data, dict) else ""


def _results_name(results: Path) -> str:
    """The ``scenario`` column of the first row of *results* ('' where there is none): the
    name of a run whose scenario named none (its file's stem), kept in every row. A run now
    writes that name into its copy; folders written before keep only this."""
    try:
        row = next(iter_rows(results), None)
    except (OSError, UnicodeError, AtpsimError):
        return ""
    return str(row.get("scenario") or "") if row else ""
