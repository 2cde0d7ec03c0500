"""An imported job as a scenario file: YAML with every value's origin as a comment.

The YAML is written by hand (PyYAML drops comments) from plain values only (integers,
booleans, strings and lists of them), each on its own line with its comment::

    model:
      hidden: 12288  # from --hidden-size 12288 (examples/megatron-gpt3-175b.sh:7)

A header says what was imported, the topology chosen and why, and lists everything the
import did not carry over (:class:`~atpsim.importers.trace.Finding`). ``yaml.safe_load`` of
the text is :meth:`ImportedJob.scenario` (the tests check it).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from atpsim.importers.trace import IGNORED, NOT_MODELLED, UNKNOWN, ImportedJob, Traced

#: The characters a bare (unquoted) string may have, in a block or inside a flow list.
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_HEADINGS = (
    (UNKNOWN, "Not understood (left out of the scenario: check each)"),
    (NOT_MODELLED, "Understood but not modelled by atpsim (the real run's time or memory differs)"),
    (IGNORED, "Ignored (no bearing on an iteration's time)"),
)


def scenario_yaml(job: ImportedJob) -> str:
    """The job scenario of *job* as YAML text, every value's origin a comment beside it."""
    lines = _header(job)
    lines.append(f"name: {scalar(job.name)}")
    lines.append(f"description: {scalar(job.description)}")
    lines.append(_item("topology", job.topology, indent=""))
    for section, table in (("model", job.model), ("parallelism", job.parallelism)):
        lines.append(f"{section}:")
        lines += [_item(key, item, indent="  ") for key, item in table.items()]
    return "\n".join(lines) + "\n"


def _header(job: ImportedJob) -> list[str]:
    lines = [
        f"# Imported by `atpsim import {job.kind}` from {job.source}.",
        "# Each value's comment says where it came from: a line of the input, an option of",
        "# `atpsim import`, or the framework's default where the input leaves it out.",
    ]
    lines += [f"# {note}" for note in job.notes]
    for kind, heading in _HEADINGS:
        findings = job.of_kind(kind)
        if findings:
            lines.append(f"# {heading}:")
            lines += [f"#   {_one_line(f.describe())}" for f in findings]
    return lines


def _item(key: str, item: Traced, *, indent: str) -> str:
    return f"{indent}{key}: {value_text(item.value)}  # {_one_line(item.comment())}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def value_text(value: Any) -> str:
    """*value* (an int, bool, string, or a list of these) as a YAML flow value."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return scalar(value)


def scalar(value: Any) -> str:
    """One YAML scalar: ``true``/``false``, a number, a bare word where YAML reads it back as
    the same string, else a double-quoted (JSON) string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(yaml.safe_dump(value)).splitlines()[0]  # 1.0e-05: YAML 1.1 reads 1e-05 as text
    text = str(value)
    if _PLAIN.match(text) and yaml.safe_load(text) == text:
        return text  # e.g. bf16, 1f1b, gpt3-13b; not true, 1e5, 0x10 or 1.0
    return json.dumps(text)
