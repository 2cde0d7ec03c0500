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
    """The ``name`` of the scenario copy at *path* ('' where it cannot be read)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, yaml.YAMLError):
        return ""
    return str(data.get("name", "")) if isinstance(data, dict) else ""
