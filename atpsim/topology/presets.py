"""Named topologies (ic1 ... ic6, dgx-a100, dgx-h100) read from ``atpsim/data/presets.yaml``.

A preset is a builder plus parameters, each number with a ``source`` note in the data file, and
the name of its default hardware profile (``Topology.meta["hardware"]``). Parameters can be
overridden: ``{"preset": "ic5", "gpus": 256}``; a ``gpus`` override (or *n_gpus*) resizes a
scalable preset through its builder's sizing rule (e.g. ic6: the most square 2D torus).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from atpsim.errors import TopologyError, did_you_mean
from atpsim.topology.graph import Topology
from atpsim.topology.sizing import SIZE_FROM_GPUS, build_from_builder


@functools.cache
def _presets() -> dict[str, dict[str, Any]]:
    text = resources.files("atpsim").joinpath("data/presets.yaml").read_text()
    data = yaml.safe_load(text)
    return {str(k): v for k, v in data.items()}


def preset_names() -> list[str]:
    """Every preset name, in the order of the data file."""
    return list(_presets())


def preset_info(name: str) -> dict[str, Any]:
    """The data-file entry of preset *name* (builder, params, hardware, description, source)."""
    presets = _presets()
    if name not in presets:
        raise TopologyError(f"unknown topology preset {name!r}{did_you_mean(name, presets)}")
    return presets[name]


def build_preset(
    name: str, overrides: dict[str, Any] | None = None, *, n_gpus: int | None = None
) -> Topology:
    """Build preset *name* with *overrides* applied. On a scalable preset, *n_gpus* or an override
    ``gpus`` resizes it by its builder's sizing rule; a fixed-size preset ignores *n_gpus* and
    passes every override (``gpus`` included) to its builder."""
    info = preset_info(name)
    builder = info["builder"]
    params = dict(info.get("params") or {})
    overrides = dict(overrides or {})
    scalable = bool(info.get("scalable"))
    size = overrides.pop("gpus", None) if scalable else None
    if size is None and scalable and n_gpus is not None:
        size = n_gpus
    if size is not None:
        params.update(SIZE_FROM_GPUS[builder](size, {**params, **overrides}))
    params.update(overrides)
    topology = build_from_builder(builder, params)
    topology.name = name if not overrides and size is None else f"{name}:{topology.n_gpus}"
    topology.description = f"{info.get('description', name)} -- {topology.description}"
    topology.meta["preset"] = name
    if "hardware" in info:  # else the builder's (its generation's), else the caller's default
        topology.meta["hardware"] = info["hardware"]
    return topology
