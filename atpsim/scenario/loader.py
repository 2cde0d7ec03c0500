"""Scenario file -> :class:`Scenario`, every bad input as one-line :class:`ScenarioError`.

The message names the file, the key path inside it and what was expected, e.g.
``fig12.yaml: parallelism.meshes[1]: DeviceMesh(2, 3) has 6 devices; expected 8``. Loading
also expands the sweep once (:func:`atpsim.scenario.sweep.expand_sweep`), so the checks that
need the topology (device counts, a disconnected custom graph) fail here, not mid-run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from atpsim.errors import ScenarioError, read_text
from atpsim.scenario.report import ReportSections
from atpsim.scenario.schema import Scenario, render_key, show
from atpsim.yamlfile import load_yaml

#: pydantic error type -> what was expected (the got-value is appended).
_EXPECTED = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "string_type": "expected a string",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
}


def read_yaml(path: Path, source: str) -> Any:
    """The YAML document in *path*; a syntax error names its line and column."""
    return parse_yaml(read_text(path, "the scenario file", ScenarioError), source)


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document *text* (read from *source*), read by :func:`atpsim.yamlfile.load_yaml`
    (merge keys taken; a key written twice, a list as a key, too deep a nesting or an alias
    bomb refused): any failure is a :class:`ScenarioError` naming the file, line and column."""
    return load_yaml(text, source, ScenarioError)


def error_from_validation(error: ValidationError, raw: Any, source: str) -> ScenarioError:
    """The first error of *error* as a :class:`ScenarioError` with the key path in *raw*."""
    detail = error.errors(include_url=False)[0]
    ctx = detail.get("ctx") or {}
    loc = (*detail["loc"], *ctx.get("subkey", ()))
    key = render_key(loc, raw) or None
    return ScenarioError(_describe(detail), source=source, key=key)


def _describe(detail: Any) -> str:
    kind, ctx = detail["type"], detail.get("ctx") or {}
    if kind == "scenario":
        return str(ctx["message"])
    if kind == "missing":
        return "missing required key"
    if kind == "greater_than_equal":
        return f"expected a value >= {ctx['ge']}, got {show(detail['input'])}"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {show(detail['input'])}"
    message = str(detail["msg"]).removeprefix("Value error, ")
    return f"{message[:1].lower()}{message[1:]}, got {show(detail['input'])}"


def load_scenario(path: str | Path, *, expand: bool = True) -> Scenario:
    """Read, validate and (unless *expand* is false) expand the scenario in *path*.

    ``name`` defaults to the file's stem; relative file paths inside resolve against the
    file's folder. Raises :class:`ScenarioError` with the file, key path and expectation.
    """
    path = Path(path)
    source = str(path)
    raw = read_yaml(path, source)
    if not isinstance(raw, dict):
        raise ScenarioError(f"expected a mapping of scenario keys, got {show(raw)}", source=source)
    data = raw if "name" in raw else {**raw, "name": path.stem}
    try:
        scenario = Scenario.model_validate(data, context={"base_dir": str(path.parent)})
    except ValidationError as error:
        raise error_from_validation(error, raw, source) from None
    scenario._source = source
    scenario._raw = raw
    if expand:
        # lazy: the sweep pulls in the engine (and scipy); the report layer reads sections only
        from atpsim.scenario.sweep import expand_sweep

        expand_sweep(scenario)
    return scenario


def load_report_sections(text: str, source: str) -> ReportSections:
    """The name, description and typed ``report:`` and ``reference:`` sections of the scenario
    YAML *text* (a run folder's copy, named *source* in errors). Only these sections are read:
    the rest was checked when the scenario ran."""
    raw = parse_yaml(text, source)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"expected a mapping of scenario keys, got {show(raw)}", source=source)
    try:
        return ReportSections.model_validate(raw)
    except ValidationError as error:
        raise error_from_validation(error, raw, source) from None
