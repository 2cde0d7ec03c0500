"""The scenario's ``report:`` section, typed and checked before a run starts.

Every key is optional::

    report:
      title: "Scaling past the paper"
      notes: |                      # Markdown paragraphs: what the results show
        ...
      tflops_unit: paper            # si (10^12, default) | paper (2^40): the bar figure's unit
      atp: [1, 2, 4]                # the ATP-i lines of the scaling figure
      log_y: true                   # every figure: logarithmic y axis
      columns: [topology]           # every figure: results columns whose values make the
      rows: [model, chunks]         #   panel columns / panel rows (see below)
      figures:                      # kinds to draw (default: chosen from the table); a kind
        - atp_bars                  #   alone, or a kind with options of its own that replace
        - comm_scaling: {select: {chunks: 1, model: M4}, log_y: true}
        - comm_scaling: {select: {chunks: 4}, rows: [algorithm, placement]}

Facets: the panels' columns are the combinations of the *columns* (default: the topology);
their rows the combinations of the *rows* (default: none). Any other parameter that still
varies inside a panel (model, chunks, algorithm, placement, ...) is appended to the rows, so a
panel never mixes points. *select* keeps only the points whose column takes one of the given
values (a value or a list), which is how a big sweep gets several small figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from atpsim.errors import ScenarioError
from atpsim.report.data import TFLOPS_COLUMNS
from atpsim.results.schema import COLUMN_NAMES

FIGURE_KINDS = ("atp_bars", "comm_scaling", "chunk_table", "scheme_bars")
_FIGURE_KEYS = ("log_y", "columns", "rows", "select")


@dataclass(frozen=True)
class FigureSpec:
    """One figure to draw: its *kind* (from :data:`FIGURE_KINDS`), a logarithmic y axis
    (*log_y*), the results columns that make its panel *columns* and *rows* (None: the
    default), and *select*: (column, allowed values as strings) pairs filtering the points."""

    kind: str
    log_y: bool = False
    columns: tuple[str, ...] | None = None
    rows: tuple[str, ...] | None = None
    select: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class ReportOptions:
    """The ``report:`` section (see the module docstring). *figures*: the figures to draw
    (None: chosen from the table); *title*; *notes*; *tflops_unit*: ``si`` or ``paper``;
    *atp*: the ATP-i lines of the scaling figure; *log_y*, *columns*, *rows*: defaults of
    every figure."""

    figures: tuple[FigureSpec, ...] | None = None
    title: str | None = None
    notes: str = ""
    tflops_unit: str = "si"
    atp: tuple[int, ...] = (1, 2, 4)
    log_y: bool = False
    columns: tuple[str, ...] | None = None
    rows: tuple[str, ...] | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, source: str | None) -> ReportOptions:
        """Options from the ``report:`` mapping *raw*; bad keys/values raise ScenarioError
        naming the key below ``report``."""
        raw = dict(_mapping(raw or {}, "report", source))
        _known_keys(raw, [f.name for f in fields(cls)], "report", source)
        values = {k: v for k, v in raw.items() if k != "figures"}
        for key, (kind, text) in _KINDS.items():
            if key in values and not isinstance(values[key], kind):
                raise _error(f"expected {text}, got {values[key]!r}", source, f"report.{key}")
        typed: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
        }
        options = cls(**typed)
        _check_scalars(options, source)
        options = replace(options, columns=_names(raw.get("columns"), "report.columns", source))
        options = replace(options, rows=_names(raw.get("rows"), "report.rows", source))
        if raw.get("figures") is not None:
            specs = _figure_specs(raw["figures"], options, source)
            options = replace(options, figures=specs)
        return options

    def default_spec(self, kind: str) -> FigureSpec:
        """A figure of *kind* with this report's default options."""
        return FigureSpec(kind, self.log_y, self.columns, self.rows)


_KINDS: dict[str, tuple[Any, str]] = {
    "title": ((str, type(None)), "a string"),
    "notes": (str, "a string"),
    "tflops_unit": (str, "'si' or 'paper'"),
    "atp": (list, "a list of positive integers"),
    "log_y": (bool, "true or false"),
}


def _error(message: str, source: str | None, key: str) -> ScenarioError:
    return ScenarioError(message, source=source, key=key)


def _mapping(value: Any, key: str, source: str | None) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise _error(f"expected a mapping, got {value!r}", source, key)
    return value


def _known_keys(raw: Mapping[Any, Any], valid: list[str], key: str, source: str | None) -> None:
    from atpsim.topology.registry import did_you_mean

    for name in raw:
        if name not in valid:
            raise _error(f"unknown key {name!r}{did_you_mean(name, valid)}", source, key)


def _check_scalars(options: ReportOptions, source: str | None) -> None:
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 1 for i in options.atp):
        message = f"expected a list of positive integers, got {list(options.atp)}"
        raise _error(message, source, "report.atp")
    if options.tflops_unit not in TFLOPS_COLUMNS:
        message = f"expected 'si' or 'paper', got {options.tflops_unit!r}"
        raise _error(message, source, "report.tflops_unit")


def _names(value: Any, key: str, source: str | None) -> tuple[str, ...] | None:
    """A list of results column names (a single name is a list of one); None stays None."""
    from atpsim.topology.registry import did_you_mean

    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _error(f"expected a list of results columns, got {value!r}", source, key)
    for k, name in enumerate(names):
        if name not in COLUMN_NAMES:
            hint = did_you_mean(name, COLUMN_NAMES)
            raise _error(f"unknown results column {name!r}{hint}", source, f"{key}[{k}]")
    return tuple(names)


def _figure_specs(raw: Any, options: ReportOptions, source: str | None) -> tuple[FigureSpec, ...]:
    if not isinstance(raw, list):
        raise _error(f"expected a list of figure kinds, got {raw!r}", source, "report.figures")
    return tuple(
        _figure_spec(entry, options, source, f"report.figures[{k}]") for k, entry in enumerate(raw)
    )


def _figure_spec(entry: Any, options: ReportOptions, source: str | None, key: str) -> FigureSpec:
    """``kind`` or ``{kind: {log_y, columns, rows, select}}`` (unset options: the report's)."""
    kind, extra = (entry, {}) if isinstance(entry, str) else _one_entry(entry, source, key)
    if kind not in FIGURE_KINDS:
        expected = f"expected one of {', '.join(FIGURE_KINDS)}"
        raise _error(f"unknown figure {kind!r}; {expected}", source, key)
    extra = _mapping(extra or {}, f"{key}.{kind}", source)
    _known_keys(
        extra, list(_FIGURE_KEYS if kind != "chunk_table" else ("select",)), f"{key}.{kind}", source
    )
    spec = options.default_spec(kind)
    if "log_y" in extra:
        if not isinstance(extra["log_y"], bool):
            message = f"expected true or false, got {extra['log_y']!r}"
            raise _error(message, source, f"{key}.{kind}.log_y")
        spec = replace(spec, log_y=extra["log_y"])
    if "columns" in extra:
        spec = replace(spec, columns=_names(extra["columns"], f"{key}.{kind}.columns", source))
    if "rows" in extra:
        spec = replace(spec, rows=_names(extra["rows"], f"{key}.{kind}.rows", source))
    if "select" in extra:
        spec = replace(spec, select=_select(extra["select"], f"{key}.{kind}.select", source))
    return spec


def _one_entry(entry: Any, source: str | None, key: str) -> tuple[Any, Any]:
    if not isinstance(entry, Mapping) or len(entry) != 1:
        message = f"expected a figure kind or {{kind: {{options}}}}, got {entry!r}"
        raise _error(message, source, key)
    return next(iter(entry.items()))


def _select(raw: Any, key: str, source: str | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """{column: value or [values]} as sorted (column, (value as text, ...)) pairs."""
    from atpsim.topology.registry import did_you_mean

    pairs = []
    for name, values in _mapping(raw, key, source).items():
        if name not in COLUMN_NAMES:
            hint = did_you_mean(name, COLUMN_NAMES)
            raise _error(f"unknown results column {name!r}{hint}", source, key)
        listed = values if isinstance(values, list) else [values]
        if not listed or any(isinstance(v, (Mapping, list)) for v in listed):
            message = f"expected a value or a list of values, got {values!r}"
            raise _error(message, source, f"{key}.{name}")
        pairs.append((str(name), tuple(str(v) for v in listed)))
    return tuple(pairs)
