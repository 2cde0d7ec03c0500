"""Imports go one way down the data flow (house style): only the engine imports simpy, only
validation/ imports torch, only the report layer imports matplotlib."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "atpsim"


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules_importing(top_level: str) -> list[str]:
    return sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if top_level in _imports(p)
    )


def test_only_engine_imports_simpy():
    assert all(m.startswith("engine/") for m in _modules_importing("simpy"))


def test_package_never_imports_torch():
    assert _modules_importing("torch") == []


def test_only_report_imports_matplotlib():
    allowed = ("report/", "commands/")
    assert all(m.startswith(allowed) for m in _modules_importing("matplotlib"))
