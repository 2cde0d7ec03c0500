"""One point of a sweep: everything needed to simulate a single configuration.

The scenario loader expands a scenario file into a list of :class:`SweepPoint`; the runner
calls :func:`atpsim.api.simulate_point` on each and writes one results row per point.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import SageMakerGroup
from atpsim.results.schema import STEP_SCHEMA, ResultsSchema
from atpsim.scenario.inputs import point_key
from atpsim.scenario.workload import STEP, Workload


@dataclass(frozen=True)
class SweepPoint:
    """A fully resolved configuration.

    *topology* is a plain mapping that :func:`atpsim.topology.spec.load_topology` accepts:
    ``{"preset": "ic1"}``, ``{"builder": "torus", "dims": [4, 4], ...}`` or
    ``{"file": "path.yaml"}``; *topology_label* is its short name for tables.
    *calibration* optionally replaces derived all-reduce bandwidths in analytic mode
    (keys ``B1_Bps``, ``B2_Bps``, the paper's calibrated B1, B2 of Section 5.3).

    The topology is built with ``load_topology(point.topology, n_gpus=point.n_devices)``:
    *n_devices* sizes scalable presets and builders (``ic5``, ``ic6``, ``ic4``) that the
    mapping leaves open; a topology with more GPUs than *n_devices* uses ranks 0..n-1.

    *group* marks the candidates of one ATP-OPT choice: a scenario asking for ``atp-opt``
    expands into one point per factorization ``d1 * d2 = n_devices`` with
    ``group="atp-opt"``; the runner simulates each like any other point and the report keeps
    the fastest mesh among the points sharing :meth:`group_key` as ATP-OPT. Points outside a
    group have ``group=None`` (and their :meth:`key` does not mention it).

    *tp* is the tensor parallelism, and its type says which: ATP's
    :class:`~atpsim.parallel.mesh.DeviceMesh` (d1, d2, placement), or the
    :class:`~atpsim.parallel.grid.Grid` (q, depth) of 2D / 2.5D SUMMA
    (:mod:`atpsim.parallel.summa`, ``n_devices = q²·depth``; depth 1 is 2D), or the
    :class:`~atpsim.parallel.sagemaker.SageMakerGroup` of SageMaker-style TP over ``t =
    n_devices`` data-parallel ranks. :attr:`scheme` and :attr:`mesh_label` are derived from
    it. Only a SUMMA or SageMaker point's :meth:`key` mentions the scheme (and a SUMMA grid's
    depth), so the keys of ATP points are what they were before the other schemes existed.
    """

    schema: ClassVar[ResultsSchema] = STEP_SCHEMA
    workload: ClassVar[Workload] = STEP

    scenario: str
    topology: str | Mapping[str, Any]
    topology_label: str
    n_devices: int
    hardware: str
    model: ModelConfig
    tp: DeviceMesh | Grid | SageMakerGroup
    chunks: int = 1
    algorithm: str = "auto"
    mode: str = "des"
    calibration: Mapping[str, float] | None = field(default=None)
    group: str | None = None

    def key(self) -> str:
        """A stable identifier used to resume a sweep: the hex digest of the canonical JSON
        and of the contents of the files the point reads (:func:`point_key`)."""
        return point_key(self.as_dict(), self.topology, self.hardware)

    def columns(self, index: int) -> dict[str, Any]:
        """The results columns that describe this point (:func:`point_columns`)."""
        return point_columns(self, index)

    def group_key(self) -> str | None:
        """The key shared by every candidate mesh of this point's group (its key without the
        mesh), or None outside a group: the report picks the best mesh per group key."""
        if self.group is None:
            return None
        fields = self.as_dict()
        del fields["mesh"]
        return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        """Canonical JSON-able form (used for keys and for the results table's parameters)."""
        fields = {
            "scenario": self.scenario,
            "topology": self.topology if isinstance(self.topology, str) else dict(self.topology),
            "topology_label": self.topology_label,
            "n_devices": self.n_devices,
            "hardware": self.hardware,
            "model": self.model.as_dict(),
            "mesh": [self.shape.d1, self.shape.d2, self.shape.placement],
            "chunks": self.chunks,
            "algorithm": self.algorithm,
            "mode": self.mode,
            "calibration": dict(self.calibration) if self.calibration else None,
        }
        if self.group is not None:
            fields["group"] = self.group
        if isinstance(self.tp, Grid):
            fields["scheme"] = self.scheme
            fields["depth"] = self.tp.depth
        elif isinstance(self.tp, SageMakerGroup):
            fields["scheme"] = self.scheme
        return fields

    @property
    def scheme(self) -> Literal["atp", "summa", "sagemaker"]:
        """The tensor-parallel scheme: 'atp' for a DeviceMesh, 'summa' for a Grid,
        'sagemaker' for a SageMakerGroup."""
        if isinstance(self.tp, Grid):
            return "summa"
        return "sagemaker" if isinstance(self.tp, SageMakerGroup) else "atp"

    @property
    def mesh(self) -> DeviceMesh:
        """ATP's mesh of an ATP point; another scheme's point raises :class:`SimulationError`."""
        if not isinstance(self.tp, DeviceMesh):
            raise SimulationError(f"a {self.scheme} point has {self.tp}, not an ATP DeviceMesh")
        return self.tp

    @property
    def shape(self) -> DeviceMesh:
        """The mesh the results table describes the point by: ATP's mesh, one layer of a
        SUMMA grid, ``DeviceMesh(q, q)``, or a SageMaker group's ``DeviceMesh(t, 1)``."""
        if isinstance(self.tp, Grid):
            return self.tp.layer_mesh()
        return self.tp.mesh() if isinstance(self.tp, SageMakerGroup) else self.tp

    @property
    def mesh_label(self) -> str:
        """'d1xd2' for ATP; 'qxq' (2D) or 'qxqxd' (2.5D) for a SUMMA grid."""
        label = f"{self.shape.d1}x{self.shape.d2}"
        if isinstance(self.tp, Grid) and self.tp.depth > 1:
            return f"{label}x{self.tp.depth}"
        return label


def point_columns(point: SweepPoint, index: int) -> dict[str, Any]:
    """The results columns that describe *point*, the *index*-th point of its sweep (the
    point columns of :mod:`atpsim.results.schema`)."""
    model, mesh = point.model, point.shape
    return {
        "scenario": point.scenario,
        "point_key": point.key(),
        "topology": point.topology_label,
        "n_devices": point.n_devices,
        "model": model.name,
        "hidden": model.hidden,
        "heads": model.heads,
        "layers": model.layers,
        "batch": model.batch,
        "seq": model.seq,
        "dtype": model.dtype,
        "d1": mesh.d1,
        "d2": mesh.d2,
        "mesh": point.mesh_label,
        "atp_i": mesh.d2,
        "chunks": point.chunks,
        "algorithm": point.algorithm,
        "mode": point.mode,
        "hardware": point.hardware,
        "placement": mesh.placement,
        "mesh_group": point.group,
        "group_key": point.group_key(),
        "point_index": index,
        "scheme": point.scheme,
    }
