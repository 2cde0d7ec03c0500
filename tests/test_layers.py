"""The package's layering (../shared/HOUSE_STYLE.md, "Imports go one way"), checked on the
import statements of every module, function-local and type-checking imports included:

- each part of the package imports only the parts below it in :data:`LAYERS`, so no two
  subpackages import each other;
- only the engine imports simpy, only the report layer matplotlib, nothing in it torch;
- the command line, the validation harness and the benchmarks reach the package only
  through :mod:`atpsim.api`, the one seam.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "atpsim"

#: The parts of the package, lowest first: a part may import only parts before it.
LAYERS = (
    "errors",
    "units",
    "topology",
    "collectives",
    "program",
    "compute",
    "parallel",
    "analytic",
    "engine",
    "calibrate",
    "training",
    "results",
    "scenario",
    "report",
    "sweep",
    "api",
    "__init__",
    "commands",
    "cli",
)
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def imported_modules(path: pathlib.Path) -> set[str]:
    """Every module *path* imports, anywhere in the file (dotted names, absolute)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def part_of(module: str) -> str | None:
    """The layer an ``atpsim...`` module belongs to (None outside the package)."""
    parts = module.split(".")
    if parts[0] != "atpsim":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def package_files() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def own_part(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE).parts
    return relative[0] if len(relative) > 1 else relative[0].removesuffix(".py")


def upward_imports(path: pathlib.Path, mine: str) -> list[str]:
    """'module (part -> part)' for every import of *path*, a file of part *mine*, that does
    not go down the layers."""
    found = []
    rank = RANK.get(mine, -1)
    for module in sorted(imported_modules(path)):
        theirs = part_of(module)
        if theirs is not None and theirs != mine and RANK.get(theirs, len(RANK)) >= rank:
            found.append(f"{module} ({mine} -> {theirs})")
    return found


def test_every_part_of_the_package_has_a_layer():
    parts = {own_part(p) for p in package_files()} - {"data"}
    assert parts <= set(RANK), f"add {sorted(parts - set(RANK))} to LAYERS"


def test_imports_go_down_the_layers_only():
    found = [
        f"{path.relative_to(ROOT)} imports {edge}"
        for path in package_files()
        for edge in upward_imports(path, own_part(path))
    ]
    assert found == []


def test_an_upward_import_is_caught(tmp_path):
    """The check itself can fail: a topology module that imports the engine inside a
    function (as a cycle would hide itself) is reported."""
    graph = (PACKAGE / "topology" / "graph.py").read_text(encoding="utf-8")
    copy = tmp_path / "graph.py"
    copy.write_text(graph + "\n\ndef _late():\n    from atpsim.engine import collective\n")
    assert upward_imports(copy, "topology") == ["atpsim.engine (topology -> engine)"]


def _modules_importing(top_level: str) -> list[str]:
    return sorted(
        str(p.relative_to(PACKAGE))
        for p in package_files()
        if any(m.split(".")[0] == top_level for m in imported_modules(p))
    )


def test_only_engine_imports_simpy():
    assert all(m.startswith("engine/") for m in _modules_importing("simpy"))


def test_package_never_imports_torch():
    assert _modules_importing("torch") == []


def test_only_report_imports_matplotlib():
    assert all(m.startswith("report/") for m in _modules_importing("matplotlib"))


@pytest.mark.parametrize("folder", ["atpsim/commands", "validation", "bench"])
def test_outside_code_goes_through_the_api(folder):
    """commands/, validation/ and bench/ import nothing of the package but atpsim.api."""
    offenders = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for module in sorted(imported_modules(path))
        if part_of(module) is not None and module != "atpsim.api"
        and not module.startswith("atpsim.commands")
    ]  # fmt: skip
    assert offenders == []
