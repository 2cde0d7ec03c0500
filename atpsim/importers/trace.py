"""What an import produces: a job scenario whose every value says where it came from.

An importer (:mod:`atpsim.importers`) reads a framework's description of a training run and
returns an :class:`ImportedJob`: the scenario's ``model`` and ``parallelism`` keys, each a
:class:`Traced` value with the :class:`Origin` of each input it was computed from (a line of
the input, an ``atpsim import`` option, or the framework's documented default), and every part
of the input it did not carry over, sorted by why (:class:`Finding`):

- *unknown*: not understood (a typo, or a setting atpsim has never heard of): one warning each;
- *not modelled*: understood, and it changes the real run's time or memory, but atpsim's
  simulation has no such knob (FlashAttention, RMSNorm, TP communication overlap, ...);
- *ignored*: understood, and it has no bearing on one iteration's time (learning rate, data
  paths, logging, checkpoints, seeds).

Nothing of the input is dropped silently: :meth:`ImportedJob.warnings` names the first two
kinds one by one and the third in one line, and the YAML (:mod:`atpsim.importers.writer`)
lists all three as comments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Where an origin's value was read: a line of the input, an option of ``atpsim import``,
#: or the framework's default (nothing written).
INPUT, OPTION, DEFAULT = "input", "option", "default"


@dataclass(frozen=True)
class Origin:
    """One input a value was read from: *text* as written (``--hidden-size 12288``,
    ``model.hidden_size: 12288``), in file *source* at *line* (1-based) for an input line;
    for an option or a default, *text* says which (``--gpus 16``, ``Megatron-LM's default 1
    for --tensor-model-parallel-size``)."""

    text: str
    source: str | None = None
    line: int | None = None
    kind: str = INPUT

    def describe(self) -> str:
        """``--hidden-size 12288 (examples/x.sh:7)``, ``--gpus 16 (atpsim import option)``,
        or a default's text."""
        text = " ".join(self.text.split())
        if self.kind == INPUT:
            where = f"{self.source}:{self.line}" if self.line is not None else str(self.source)
            return f"{text} ({where})"
        if self.kind == OPTION:
            return f"{text} (atpsim import option)"
        return text

    @property
    def where(self) -> str | None:
        """``file:line`` (or the file) of an input line; None for an option or a default."""
        if self.kind != INPUT:
            return None
        return f"{self.source}:{self.line}" if self.line is not None else self.source


def default(text: str) -> Origin:
    """An origin that is a framework's default, e.g. ``default("Megatron-LM's default 1 for
    --tensor-model-parallel-size")``."""
    return Origin(text, kind=DEFAULT)


def option(text: str) -> Origin:
    """An origin that is an option of ``atpsim import`` (``--gpus 16``)."""
    return Origin(text, kind=OPTION)


@dataclass(frozen=True)
class Traced:
    """A scenario value and what it came from: *origins* (one or more) and, where the value
    is computed rather than copied, *how* (``96 layers / 16 stages / 2 per chunk``)."""

    value: Any
    origins: tuple[Origin, ...]
    how: str = ""

    def comment(self) -> str:
        """``from --num-layers 96 (x.sh:5): how`` or ``default: ...``, one line."""
        inputs = [o for o in self.origins if o.kind != DEFAULT]
        defaults = [o for o in self.origins if o.kind == DEFAULT]
        parts = []
        if inputs:
            parts.append("from " + "; ".join(o.describe() for o in inputs))
        if defaults:
            parts.append("; ".join(o.describe() for o in defaults))
        text = "; ".join(parts)
        return f"{text}: {self.how}" if self.how else text


def traced(value: Any, *origins: Origin, how: str = "") -> Traced:
    """:class:`Traced` of *value* from *origins* (each once, in order)."""
    return Traced(value, tuple(dict.fromkeys(origins)), how)


#: Why a part of the input was not carried over (:class:`Finding`).
UNKNOWN, NOT_MODELLED, IGNORED = "unknown", "not modelled", "ignored"


@dataclass(frozen=True)
class Finding:
    """A part of the input not carried over into the scenario, *kind* one of unknown, not
    modelled or ignored (the module docstring), with *why* in a few words."""

    origin: Origin
    kind: str
    why: str = ""

    def describe(self) -> str:
        """``--use-flash-attn (x.sh:21): attention is timed unfused``."""
        return f"{self.origin.describe()}: {self.why}" if self.why else self.origin.describe()


@dataclass
class ImportedJob:
    """A job scenario imported from *source* (a *kind* of input: ``megatron``, ``nemo``,
    ``deepspeed``, ``hf``): its *name*, *description*, *topology* spec, the scenario's
    ``model`` and ``parallelism`` keys (traced), and the *findings* (what was not carried
    over, and why). :meth:`scenario` is the plain mapping; :func:`atpsim.importers.writer.
    scenario_yaml` the YAML with every value's origin as a comment."""

    kind: str
    source: str
    name: str
    description: str
    topology: Traced
    model: dict[str, Traced] = field(default_factory=dict)
    parallelism: dict[str, Traced] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def scenario(self) -> dict[str, Any]:
        """The job scenario as plain values (what ``yaml.safe_load`` of the YAML gives)."""
        return {
            "name": self.name,
            "description": self.description,
            "topology": self.topology.value,
            "model": {key: item.value for key, item in self.model.items()},
            "parallelism": {key: item.value for key, item in self.parallelism.items()},
        }

    def of_kind(self, kind: str) -> list[Finding]:
        """The findings of *kind* (unknown, not modelled, ignored), in input order."""
        return [f for f in self.findings if f.kind == kind]

    def warnings(self) -> list[str]:
        """One line per part of the input not understood, one per setting understood but not
        modelled, and one line naming everything ignored: what ``atpsim import`` prints on
        stderr."""
        lines = [f"{f.origin.describe()}: not understood, left out of the scenario{_why(f)}"
                 for f in self.of_kind(UNKNOWN)]  # fmt: skip
        lines += [f"{f.origin.describe()}: not modelled by atpsim{_why(f)}"
                  for f in self.of_kind(NOT_MODELLED)]  # fmt: skip
        ignored = self.of_kind(IGNORED)
        if ignored:
            names = ", ".join(_short(f.origin) for f in ignored)
            lines.append(f"ignored (no bearing on an iteration's time; listed in the YAML): {names}")
        return lines

    def origin_of(self, key: str) -> Traced | None:
        """The traced value at scenario key *key* (``parallelism.pp``, ``model.hidden``),
        None where the key is not one this import wrote."""
        section, _, name = key.partition(".")
        name = name.split(".")[0].split("[")[0]
        table = {"model": self.model, "parallelism": self.parallelism}.get(section)
        if table is not None:
            return table.get(name)
        return self.topology if section == "topology" else None


def _why(finding: Finding) -> str:
    return f": {finding.why}" if finding.why else ""


def _short(origin: Origin) -> str:
    """A finding's name for the one-line list: the flag or key alone (``--lr``)."""
    return origin.text.split()[0].rstrip(":") if origin.text.strip() else origin.text
