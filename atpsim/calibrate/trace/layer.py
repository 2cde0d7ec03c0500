"""Which layer a trace profiled: from the trace's ``atpsim_layer`` entry (written by
``validation/bench/profile_layer.py``) or from a ``--layer`` text such as
``hidden=256,heads=8,batch=4,seq=128,mesh=1x2,chunks=1,dtype=fp32`` for a trace made
elsewhere; the text's keys override the trace's."""

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


def traced_layer(metadata: dict[str, Any], text: str | None = None) -> TracedLayer:
    """The layer of a trace whose top-level entries are *metadata*, *text* (``--layer``)
    overriding them."""
    described = metadata.get(METADATA_KEY)
    values = dict(described) if isinstance(described, dict) else {}
    given = parse_layer_text(text or "")
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
