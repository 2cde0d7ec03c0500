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
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "atpsim"

#: The parts of the package, lowest first: a part may import only parts before it.
LAYERS = (
    "errors",
    "yamlfile",
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
    "importers",
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


#: A command-line flag inside a string: ``--devices``, ``--fit-only`` (not ``a--b`` or ``---``).
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _megatron_flags() -> set[str]:
    """The flags atpsim.importers.megatron knows (Megatron-LM's and torchrun's), none of them
    one of atpsim's own: the importer's tables, read from their module."""
    from atpsim.importers import megatron_flags as tables

    flags = {*tables.IGNORED_FLAGS, *tables.NOT_MODELLED_FLAGS, *tables.READ_FLAGS,
             *tables.SWITCHES, *tables.LAUNCHER_FLAGS}  # fmt: skip
    return {match for flag in flags for match in FLAG.findall(flag)}


MEGATRON_FLAGS = _megatron_flags()

#: Library files whose strings may name flags, and which flags, each with its reason.
FLAGS_ALLOWED: dict[str, set[str]] = {
    # `python -m` scripts: each parses its own command line (argparse) and says so.
    # (gemm_curve's --uncertainty: the header of the data file it writes, as below.)
    "calibrate/fit/gemm_curve.py": {"--dry-run", "--uncertainty"},
    "calibrate/fit/nccl_curve.py": {"--dry-run"},
    "calibrate/paper/__main__.py": {"--dry-run", "--b-element-bytes"},
    # Headers of generated data files (committed beside the package) and report prose: the
    # command that rebuilds the file or page is part of its text, which must stay the same.
    "calibrate/paper/record.py": {"--uncertainty"},
    "calibrate/machine.py": {"--refit"},
    "report/build.py": {"--index"},
    "report/index.py": {"--index"},
    "api/search.py": {"--max-tp"},  # search.yaml's header: the command that searched it
    # Megatron-LM's and torchrun's own flags: the command line atpsim import megatron reads
    # (its flag tables and the messages naming a flag of the input), never atpsim's flags.
    "importers/megatron.py": MEGATRON_FLAGS,
    "importers/megatron_flags.py": MEGATRON_FLAGS,
    # Chromium's own command line (headless screenshot of a report's first screen).
    "report/screenshot.py": {"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--disable-extensions", "--no-first-run", "--user-data-dir",
                             "--window-size", "--screenshot", "--virtual-time-budget"},
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of *tree* (module, classes, functions): prose about
    the commands is fine there."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def flag_strings(path: pathlib.Path) -> set[str]:
    """The flags that the string constants of *path* (docstrings aside) name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return {flag for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            for flag in FLAG.findall(node.value)}  # fmt: skip


def test_only_the_commands_spell_flags():
    """The library names its parameters (``devices``; atpsim.errors.param in a message) and
    atpsim.commands shows them as flags: no string of a library module names a flag."""
    found = {}
    for path in package_files():
        name = str(path.relative_to(PACKAGE))
        if own_part(path) in ("commands", "cli"):
            continue
        extra = flag_strings(path) - FLAGS_ALLOWED.get(name, set())
        if extra:
            found[name] = sorted(extra)
    assert found == {}


def test_the_megatron_flags_allowed_are_none_of_atpsims_own():
    """The Megatron-LM flags importers/megatron.py may spell are not atpsim import's options
    (those it names by parameter)."""
    from atpsim.commands.import_cmd import command

    own = {opt for param in command.params for opt in getattr(param, "opts", ()) if opt.startswith("--")}
    assert own and not own & MEGATRON_FLAGS


def test_a_flag_in_a_library_string_is_caught(tmp_path):
    """The check itself can fail: an error keyed by a flag is found, its docstring is not."""
    module = tmp_path / "m.py"
    module.write_text('def f():\n    """Like `atpsim run --resume`."""\n'
                      '    raise ValueError("give fewer --devices")\n')  # fmt: skip
    assert flag_strings(module) == {"--devices"}


#: The most function-local imports of package modules the package may hold (issue 22: from 135):
#: each one defers a cost (matplotlib, dask, scipy, the engine) or breaks a circle, and says so.
MAX_LOCAL_IMPORTS = 40


def local_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every import of an ``atpsim`` module inside a function of *path*."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = ["atpsim" if node.level else node.module or ""]
            else:
                continue
            found.update((node.lineno, m) for m in modules if part_of(m) is not None)
    return sorted(found)


def unexplained_imports(path: pathlib.Path) -> list[int]:
    """The lines of *path*'s local package imports with no ``lazy:`` reason on the line or
    the line above."""
    lines = ["", *path.read_text(encoding="utf-8").splitlines()]
    return sorted({line for line, _ in local_imports(path)
                   if "lazy:" not in lines[line] and "lazy:" not in lines[line - 1]})  # fmt: skip


def test_local_imports_are_few_and_explained():
    """Package modules are imported at the top of a file unless importing them there would
    cost every caller (a plot library, a cluster client, a solver) or close a circle: at most
    :data:`MAX_LOCAL_IMPORTS` such imports, each with a ``# lazy: why`` comment."""
    count = sum(len(local_imports(p)) for p in package_files())
    assert count <= MAX_LOCAL_IMPORTS
    unexplained = {str(p.relative_to(PACKAGE)): unexplained_imports(p) for p in package_files()}
    assert {name: lines for name, lines in unexplained.items() if lines} == {}


def test_an_unexplained_local_import_is_caught(tmp_path):
    """The check itself can fail: a local import without a reason is found, one with a reason
    on its line or the line above is not, and a third-party one is not counted."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    import numpy\n    from atpsim.errors import param\n"
                      "    # lazy: a reason\n    from atpsim.units import parse_bytes\n"
                      "    import atpsim.api  # lazy: another\n")  # fmt: skip
    assert [m for _, m in local_imports(module)] == ["atpsim.errors", "atpsim.units", "atpsim.api"]
    assert unexplained_imports(module) == [3]
