"""The scenario's ``report:`` and ``reference:`` sections, typed and checked when the scenario
is loaded (the report layer reads them, it does not check them).

Every key of ``report:`` is optional::

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

``reference:`` holds published numbers the report sets beside the simulated ones; today the
paper's Table 3 (model -> topology label -> chunks -> TFLOP/s per GPU in the paper's 2^40
unit; topology labels match case-insensitively)::

    reference:
      table3:                     # ATP paper, Table 3
        M2: {ic1: {1: 3.45, 2: 3.46, 4: 3.51}, ic2: {1: 42.82, 2: 43.59, 4: 43.73}}
      claims:                     # what the paper says, checked in the report
        - {text: "IC1: ATP gains 37-64% (Sec. 5.1)", check: atp_gain, topology: ic1,
           low: 0.37, high: 0.64,
           why: "..."}            # optional: what drives a disagreement, as tested
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from atpsim.errors import did_you_mean
from atpsim.results.schema import COLUMN_NAMES
from atpsim.scenario.fields import Frozen, KeyPath, PositiveInt, Str, invalid

FIGURE_KINDS = ("atp_bars", "comm_scaling", "chunk_table", "scheme_bars")
#: TFLOP/s units: SI (10^12) or the paper's 2^40.
TFLOPS_UNITS = ("si", "paper")

StrictBool = Annotated[bool, Field(strict=True)]
Selection = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class FigureSpec:
    """One figure to draw: its *kind* (from :data:`FIGURE_KINDS`), a logarithmic y axis
    (*log_y*), the results columns that make its panel *columns* and *rows* (None: the
    default), and *select*: (column, allowed values as strings) pairs filtering the points."""

    kind: str
    log_y: bool = False
    columns: tuple[str, ...] | None = None
    rows: tuple[str, ...] | None = None
    select: Selection = ()


def _unknown_column(name: Any) -> str:
    return f"unknown results column {name!r}{did_you_mean(name, COLUMN_NAMES)}"


def _column_names(value: Any) -> tuple[str, ...]:
    """A list of results column names (a single name is a list of one)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise invalid(f"expected a list of results columns, got {value!r}")
    for k, name in enumerate(names):
        if name not in COLUMN_NAMES:
            raise invalid(_unknown_column(name), (k,))
    return tuple(names)


def _selection(value: Any) -> Selection:
    """``{column: value or [values]}`` as (column, (value as text, ...)) pairs, in order."""
    if not isinstance(value, Mapping):
        raise invalid(f"expected a mapping, got {value!r}")
    pairs = []
    for name, values in value.items():
        if name not in COLUMN_NAMES:
            raise invalid(_unknown_column(name), (str(name),))
        listed = values if isinstance(values, list) else [values]
        if not listed or any(isinstance(v, (Mapping, list)) for v in listed):
            message = f"expected a value or a list of values, got {values!r}"
            raise invalid(message, (str(name),))
        pairs.append((str(name), tuple(str(v) for v in listed)))
    return tuple(pairs)


ColumnNames = Annotated[tuple[str, ...], BeforeValidator(_column_names)]
Select = Annotated[Selection, BeforeValidator(_selection)]


class FigureOptions(Frozen):
    """A figure's own options; each one it sets replaces the report's (see :class:`ReportOptions`)."""

    log_y: StrictBool = False
    columns: ColumnNames | None = None
    rows: ColumnNames | None = None
    select: Select = ()


class TableOptions(Frozen):
    """The options of a table (``chunk_table``): only a selection of the points."""

    select: Select = ()


class FigureEntry(Frozen):
    """One entry of ``report.figures``: a kind alone (``atp_bars``) or a kind with its own
    options (``{comm_scaling: {log_y: true}}``); exactly one field is set."""

    atp_bars: FigureOptions | None = None
    comm_scaling: FigureOptions | None = None
    chunk_table: TableOptions | None = None
    scheme_bars: FigureOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, str):
            kind, options = data, None
        elif isinstance(data, Mapping) and len(data) == 1:
            kind, options = next(iter(data.items()))
        else:
            raise invalid(f"expected a figure kind or {{kind: {{options}}}}, got {data!r}")
        if kind not in FIGURE_KINDS:
            raise invalid(f"unknown figure {kind!r}; expected one of {', '.join(FIGURE_KINDS)}")
        return {kind: {} if options is None else options}

    @property
    def kind(self) -> str:
        """The figure kind this entry draws."""
        return next(iter(self.model_fields_set))

    def spec(self, defaults: FigureSpec) -> FigureSpec:
        """This figure's :class:`FigureSpec`: its own options where it sets them, else
        *defaults* (the report's)."""
        options: FigureOptions | TableOptions = getattr(self, self.kind)
        own = {name: getattr(options, name) for name in options.model_fields_set}
        return FigureSpec(
            self.kind,
            own.get("log_y", defaults.log_y),
            own.get("columns", defaults.columns),
            own.get("rows", defaults.rows),
            own.get("select", defaults.select),
        )


def _figure_list(value: Any) -> Any:
    if not isinstance(value, (list, tuple)):
        raise invalid(f"expected a list of figure kinds, got {value!r}")
    return value


def _tflops_unit(value: Any) -> Any:
    if not isinstance(value, str) or value not in TFLOPS_UNITS:
        raise invalid(f"expected 'si' or 'paper', got {value!r}")
    return value


def _atp(value: Any) -> tuple[int, ...]:
    listed = isinstance(value, (list, tuple))
    if not listed or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 1 for i in value
    ):
        shown = list(value) if listed else value
        raise invalid(f"expected a list of positive integers, got {shown!r}")
    return tuple(value)


class ReportOptions(Frozen):
    """The ``report:`` section (see the module docstring). *figures*: the figures to draw
    (None: chosen from the table, see :meth:`figure_specs`); *title*; *notes*;
    *tflops_unit*: ``si`` or ``paper``; *atp*: the ATP-i lines of the scaling figure;
    *log_y*, *columns*, *rows*: defaults of every figure."""

    title: Str | None = None
    notes: Str = ""
    tflops_unit: Annotated[Literal["si", "paper"], BeforeValidator(_tflops_unit)] = "si"
    atp: Annotated[tuple[int, ...], BeforeValidator(_atp)] = (1, 2, 4)
    log_y: StrictBool = False
    columns: ColumnNames | None = None
    rows: ColumnNames | None = None
    figures: Annotated[tuple[FigureEntry, ...], BeforeValidator(_figure_list)] | None = None

    def default_spec(self, kind: str) -> FigureSpec:
        """A figure of *kind* with this report's default options."""
        return FigureSpec(kind, self.log_y, self.columns, self.rows)

    def figure_specs(self) -> tuple[FigureSpec, ...] | None:
        """The figures the section asks for, each with the report's options where it sets
        none of its own; None when the section leaves the choice to the table."""
        if self.figures is None:
            return None
        return tuple(entry.spec(self.default_spec(entry.kind)) for entry in self.figures)


def _mapping(value: Any, subkey: KeyPath) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise invalid(f"expected a mapping, got {value!r}", subkey)
    return value


def _number(value: Any, kind: type, subkey: KeyPath) -> Any:
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError):
        what = "a chunk count" if kind is int else "a number"
        raise invalid(f"expected {what}, got {value!r}", subkey) from None


def _table3(value: Any) -> dict[str, dict[str, dict[int, float]]]:
    """model -> topology -> {chunks: value}, keys as text and chunk counts as integers."""
    table: dict[str, dict[str, dict[int, float]]] = {}
    for model, topologies in _mapping(value or {}, ()).items():
        for topology, by_chunks in _mapping(topologies, (str(model),)).items():
            where = (str(model), str(topology))
            cells = table.setdefault(where[0], {}).setdefault(where[1], {})
            for chunks, number in _mapping(by_chunks, where).items():
                path = (*where, str(chunks))
                value = _number(number, float, path)
                if not 0 < value < math.inf:
                    raise invalid(f"expected a TFLOP/s value > 0, got {number!r}", path)
                cells[_number(chunks, int, path)] = value
    return table


#: What a claim of the paper can assert about a report's results (atpsim.report.claims):
#: the fastest ATP mesh without chunks; ATP's best over Megatron-LM (ATP-1, chunks 1) within
#: [low, high]; a SUMMA grid below Megatron-LM; ATP above SUMMA except for some models; the
#: SUMMA advantage over Megatron-LM falling with the model; a chunk count's gain over chunks 1
#: on the same mesh within [low, high]; ATP-i's communication (in Delta) rising or falling
#: with the device count.
CLAIM_CHECKS = (
    "best_mesh",
    "atp_gain",
    "summa_below_megatron",
    "atp_beats_summa",
    "summa_advantage_shrinks",
    "chunk_gain",
    "comm_trend",
)


#: Keys a claim's check cannot do without: one of (a range needs an end) ...
CLAIM_NEEDS = {"atp_gain": ("low", "high"), "chunk_gain": ("low", "high")}
#: ... and all of.
CLAIM_NEEDS_ALL = {"best_mesh": ("mesh",), "chunk_gain": ("chunks",), "comm_trend": ("atp", "trend")}


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise invalid(f"expected a finite fraction (leave the key out for an open end), got {value}")
    return value


def _one_of_checks(value: Any) -> Any:
    if value not in CLAIM_CHECKS:
        raise invalid(f"unknown claim check {value!r}{did_you_mean(str(value), CLAIM_CHECKS)}; "
                      f"expected one of {list(CLAIM_CHECKS)}")
    return value


class Claim(Frozen):
    """One claim of the paper about a figure, with where the paper makes it (*text*), and the
    *check* (:data:`CLAIM_CHECKS`) that tests it on the rows of *topology* (and *models*,
    default every model). *mesh*: the claimed best mesh ``d1xd2``; *low*, *high*: the claimed
    range of a gain (fractions, e.g. 0.37 for 37%; either may be left open); *chunks*: the
    chunk count of a chunk gain; *atp*: the ATP-i of a trend, *trend*: ``up`` or ``down``;
    *except_models*: models the claim excepts; *why*: what drives a disagreement (or a narrow
    agreement), as a sensitivity run that changes one parameter or modelling choice showed
    it, with that run's number (the report prints it beside the verdict)."""

    text: Str
    check: Annotated[Str, BeforeValidator(_one_of_checks)]
    topology: Str
    models: tuple[Str, ...] = ()
    mesh: Str | None = None
    low: Annotated[float, AfterValidator(_finite)] | None = None
    high: Annotated[float, AfterValidator(_finite)] | None = None
    chunks: PositiveInt | None = None
    atp: PositiveInt | None = None
    trend: Literal["up", "down"] | None = None
    except_models: tuple[Str, ...] = ()
    why: Str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Claim:
        """A range that can hold and a mesh that can match a results row."""
        if self.low is not None and self.high is not None and self.low > self.high:
            raise invalid(f"expected low <= high, got low {self.low} and high {self.high}", ("low",))
        if self.mesh is not None and not re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", self.mesh):
            raise invalid(f"expected a mesh D1xD2 such as 2x4, got {self.mesh!r}", ("mesh",))
        needed = CLAIM_NEEDS.get(self.check, ())
        if needed and all(getattr(self, key) is None for key in needed):
            raise invalid(f"check {self.check} needs {' or '.join(needed)}", (needed[0],))
        for key in CLAIM_NEEDS_ALL.get(self.check, ()):
            if getattr(self, key) is None:
                raise invalid(f"check {self.check} needs {key}", (key,))
        return self


class Reference(Frozen):
    """The ``reference:`` section (see the module docstring): *table3*, the paper's Table 3
    as model -> topology label -> chunks -> TFLOP/s per GPU (2^40 unit); *claims*, what the
    paper says about the figure, each checked against the results in the report."""

    table3: Annotated[dict[str, dict[str, dict[int, float]]], BeforeValidator(_table3)] = Field(
        default_factory=dict
    )
    claims: tuple[Claim, ...] = ()

    def cells(self) -> dict[tuple[str, str, int], float]:
        """(model, topology lower-cased, chunks) -> the paper's value, for every Table 3 cell."""
        return {
            (model, topology.lower(), chunks): value
            for model, topologies in self.table3.items()
            for topology, by_chunks in topologies.items()
            for chunks, value in by_chunks.items()
        }


def _empty_if_none(value: Any) -> Any:
    return {} if value is None else value


#: ``report:`` as a scenario field: absent or empty means every default.
ReportField = Annotated[ReportOptions, BeforeValidator(_empty_if_none)]


class ReportSections(BaseModel):
    """What a report reads from its saved scenario: the *name* and *description* as written,
    and the typed ``report:`` and ``reference:`` sections. The other keys are not read (they
    were checked when the scenario ran; their relative files need not exist beside a report)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: Any = None
    description: Any = None
    report: ReportField = ReportOptions()
    reference: Reference | None = None
