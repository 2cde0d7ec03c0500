"""Which layer a trace profiled: from the trace's ``atpsim_layer`` entry (written by
``validation/bench/profile_layer.py``) or from a ``--layer`` text such as
``hidden=256,heads=8,batch=4,seq=128,mesh=1x2,chunks=1,dtype=fp32`` for a trace made
elsewhere. The text completes what the trace leaves out; a value the trace's entry says
otherwise is refused (the trace knows the layer it profiled)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError, did_you_mean, param
from atpsim.parallel.mesh import DeviceMesh

#: The trace's top-level key that describes the profiled layer.
METADATA_KEY = "atpsim_layer"
_INT_KEYS = ("hidden", "heads", "batch", "seq", "ffn_mult", "chunks", "d1", "d2")
_KEYS = (*_INT_KEYS, "mesh", "dtype")
_REQUIRED = ("hidden", "heads", "batch", "seq", "d1", "d2")


@dataclass(frozen=True)
class TracedLayer:
    """One layer of *model* on *mesh* in *chunks*; *machine*: the machine description the
    trace carries (``device``, ``cpu_count``, ...; empty if none)."""

    model: ModelConfig
    mesh: DeviceMesh
    chunks: int
    machine: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        m = self.model
        return (f"h{m.hidden}-a{m.heads}-b{m.batch}-s{m.seq}-{self.mesh.d1}x{self.mesh.d2}"
                f"-c{self.chunks}")  # fmt: skip


#: What a layer text must say when the trace does not (:func:`traced_layer`).
LAYER_TEXT = "hidden=H,heads=A,batch=B,seq=S,mesh=D1xD2,chunks=C"


def parse_layer_text(text: str) -> dict[str, Any]:
    """``"hidden=256,mesh=1x2"`` -> ``{"hidden": 256, "d1": 1, "d2": 2}``; errors name the key."""
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise AtpsimError(f"expected KEY=VALUE with KEY one of {', '.join(_KEYS)}, got "
                              f"{part!r}{did_you_mean(key, _KEYS)}", param="layer")  # fmt: skip
        alias = ("d1", "d2") if key == "mesh" else (key,)  # mesh=D1xD2 sets d1 and d2
        if any(name in values for name in alias):
            raise AtpsimError(f"{key} given twice (or with mesh) in {text!r}", param="layer")
        if key == "mesh":
            d1, x, d2 = value.lower().partition("x")
            if not (x and d1.strip().isdigit() and d2.strip().isdigit() and int(d1) * int(d2) > 0):
                raise AtpsimError(f"mesh must be D1xD2 (each >= 1), e.g. 1x2, got {value!r}", param="layer")
            values["d1"], values["d2"] = int(d1), int(d2)
        elif key in _INT_KEYS:
            if not value.strip().isdigit() or int(value) < 1:
                raise AtpsimError(f"{key} must be a positive integer, got {value!r}", param="layer")
            values[key] = int(value)
        else:
            values[key] = value.strip()
    return values


def _refuse_contradictions(described: dict[str, Any], given: dict[str, Any]) -> None:
    """Refuse ``--layer`` values that the trace's own :data:`METADATA_KEY` entry says
    otherwise (*described*): the trace records the layer it profiled, so another mesh or size
    would map its ops onto the wrong program. Values that agree, and keys the entry leaves
    out, are taken."""
    said = [(f"{key}={given[key]}", f"{key}={described[key]}") for key in _KEYS
            if key in given and key in described and key not in ("d1", "d2")
            and _disagree(given[key], described[key])]  # fmt: skip
    said[:0] = _mesh_contradiction(described, given)
    if said:
        ours, theirs = (", ".join(side) for side in zip(*said, strict=True))
        one = len(said) == 1
        raise AtpsimError(f"{ours} {'contradicts' if one else 'contradict'} the trace's own "
                          f"{METADATA_KEY!r} entry, which says {theirs}: the trace records the "
                          f"layer it profiled; leave {'it' if one else 'them'} out of "
                          f"{param('layer')} or give the trace's {'value' if one else 'values'}",
                          param="layer")  # fmt: skip


def _mesh_contradiction(described: dict[str, Any], given: dict[str, Any]) -> list[tuple[str, str]]:
    """``[("mesh=2x1", "mesh=1x2")]`` where *given* sets a mesh (or d1, d2) the trace's entry
    says otherwise; ``[]`` where they agree or either leaves it out."""
    keys = [k for k in ("d1", "d2") if k in given and k in described]
    if not any(_disagree(given[k], described[k]) for k in keys):
        return []
    if len(keys) == 2:
        return [(f"mesh={given['d1']}x{given['d2']}", f"mesh={described['d1']}x{described['d2']}")]
    return [(f"{k}={given[k]}", f"{k}={described[k]}") for k in keys]


def _disagree(given: Any, described: Any) -> bool:
    """Whether a ``--layer`` value differs from the trace's valid one (a dtype as text, the
    rest whole numbers); an entry's invalid value (``"4"``, ``4.0``) is not contradicted but
    replaced: ``--layer`` may mend an entry written by hand."""
    if isinstance(given, str):
        return isinstance(described, str) and given != described.strip()
    return isinstance(described, int) and not isinstance(described, bool) and given != described


def traced_layer(metadata: dict[str, Any], text: str | None = None) -> TracedLayer:
    """The layer of a trace whose top-level entries are *metadata*, *text* (``--layer``)
    adding what they leave out (a value they say otherwise is refused, naming both)."""
    described = metadata.get(METADATA_KEY)
    values = dict(described) if isinstance(described, dict) else {}
    given = parse_layer_text(text or "")
    _refuse_contradictions(values, given)
    values.update(given)
    missing = [k for k in _REQUIRED if k not in values]
    if missing:
        raise AtpsimError(
            f"the trace does not say which layer it profiled (no {METADATA_KEY!r} entry with "
            f"{', '.join(missing)}): give {param('layer', LAYER_TEXT)}", param="layer")  # fmt: skip
    for key in _INT_KEYS:
        value = values.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AtpsimError(f"{METADATA_KEY}.{key}: expected a whole number >= 1, got {value!r} "
                              f"({param('layer', 'KEY=VALUE')} overrides it)")  # fmt: skip
    if values["batch"] % values.get("chunks", 1):
        raise AtpsimError(f"chunks ({values.get('chunks')}) must divide the batch ({values['batch']})",
                          key=None if given else METADATA_KEY,
                          param="layer" if given else None)  # fmt: skip
    machine = values.get("machine") if isinstance(values.get("machine"), dict) else {}
    try:
        model = ModelConfig("traced", values["hidden"], values["heads"], layers=1,
                            batch=values["batch"], seq=values["seq"],
                            dtype=str(values.get("dtype", "fp32")),
                            ffn_mult=int(values.get("ffn_mult", 4)))  # fmt: skip
        mesh = DeviceMesh(values["d1"], values["d2"])
    except AtpsimError as error:
        raise AtpsimError(error.message, key=None if given else METADATA_KEY,
                          param="layer" if given else None) from None
    return TracedLayer(model, mesh, int(values.get("chunks", 1)), dict(machine or {}))
