"""One point of a job sweep: everything :func:`atpsim.training.job.run_job` needs for one whole
training iteration (the model, the DP x PP x TP layout and how the step is cut).

A job scenario expands into :class:`JobPoint` (:mod:`atpsim.scenario.job_sweep`); the sweep
runner simulates each like a :class:`~atpsim.scenario.point.SweepPoint` and writes its rows
in the job schema (:data:`atpsim.results.schema.JOB_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.partition import EVEN
from atpsim.results.schema import JOB_SCHEMA, ResultsSchema
from atpsim.scenario.inputs import point_key
from atpsim.scenario.workload import JOB, Workload
from atpsim.training.config import JobConfig, resolved_sequence_parallel
from atpsim.training.defaults import job_default

MEGATRON_1D, ATP_2D = "megatron-1d", "atp-2d"


@dataclass(frozen=True)
class JobPoint:
    """A fully resolved job: *tp* (an ATP DeviceMesh; Megatron-LM's 1D TP is (t, 1)) x *pp*
    stages x *dp* replicas on *n_devices* GPUs of *topology* (a mapping
    :func:`atpsim.topology.spec.load_topology` accepts), laid out in *order* (innermost
    first); *global_batch* samples per iteration in micro-batches of *micro_batch*; the
    rest are :class:`atpsim.training.config.JobConfig`'s fields of the same names; *network* how its
    calls share the links and *perturb* its slow GPUs and links (the keys of
    ``parallelism.perturb`` set, sorted; empty: none); *neighbour* a second job on the next
    GPUs of the fabric (``parallelism.neighbour``'s keys, sorted; empty: none); *partition*
    how the layers split over the stages (``even``, ``auto`` or a count per stage); *ep* the
    expert-parallel replicas out of *dp* (a mixture of experts; 1: none); *cp* the
    context-parallel ranks each sequence is split over (1: none; the job is then
    ``tp·cp·pp·dp`` GPUs); *offload_activations* whether the stored activations go to host
    memory between a micro-batch's forward and backward (:mod:`atpsim.training.offload`)."""

    schema: ClassVar[ResultsSchema] = JOB_SCHEMA
    workload: ClassVar[Workload] = JOB

    scenario: str
    topology: str | Mapping[str, Any]
    topology_label: str
    n_devices: int
    hardware: str
    model: ModelConfig
    tp: DeviceMesh
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    schedule: str = job_default("schedule")
    virtual_stages: int = 1
    chunks: int = 1
    algorithm: str = "ring"
    sequence_parallel: bool | None = None
    recompute: str = job_default("recompute")
    zero: int = job_default("zero")
    vocab: int = 0
    order: tuple[str, ...] = ("tp", "pp", "dp")
    network: str = "joint"
    perturb: tuple[tuple[str, Any], ...] = ()
    neighbour: tuple[tuple[str, Any], ...] = ()
    partition: str | tuple[int, ...] = EVEN
    ep: int = 1
    cp: int = 1
    offload_activations: bool = False

    def __post_init__(self) -> None:
        # The key names the setting that ran: None (the default) is on for a 1D mesh only.
        object.__setattr__(self, "sequence_parallel",
                           resolved_sequence_parallel(self.sequence_parallel, self.tp, self.model.seq))

    def config(self) -> JobConfig:
        """The :class:`JobConfig` this point stands for: its layout (*tp*, *pp*, *dp*, *order*)
        and every field of :data:`CONFIG_FIELDS`, by name (unchecked:
        :func:`atpsim.training.config.check_job`)."""
        layout = ParallelLayout(self.tp, self.pp, self.dp, self.order, ep=self.ep, cp=self.cp)
        return JobConfig(layout=layout, **{name: getattr(self, name) for name in CONFIG_FIELDS})

    @classmethod
    def from_config(cls, config: JobConfig, **given: Any) -> JobPoint:
        """The point of *config* (a searched layout, whose TP is a DeviceMesh) with the
        point's other fields *given* (scenario, topology, ...); a field of
        :data:`CONFIG_FIELDS` in *given* is taken from there rather than from *config*."""
        layout = config.layout
        if not isinstance(layout.tp, DeviceMesh):
            raise SimulationError(f"a searched layout's TP is a DeviceMesh, not {layout.tp}")
        shared = {name: getattr(config, name) for name in CONFIG_FIELDS if name not in given}
        return cls(**given, **shared, tp=layout.tp, pp=layout.pp, dp=layout.dp, order=layout.order,
                   ep=layout.ep, cp=layout.cp)

    @property
    def tp_scheme(self) -> str:
        """``megatron-1d`` for a mesh t x 1, ``atp-2d`` for d2 > 1."""
        return MEGATRON_1D if self.tp.d2 == 1 else ATP_2D

    @property
    def n_microbatches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    def as_dict(self) -> dict[str, Any]:
        """Canonical JSON-able form (the key's input); ``kind: job`` keeps it apart from any
        step point's."""
        topology = self.topology if isinstance(self.topology, str) else dict(self.topology)
        return {
            "kind": "job", "scenario": self.scenario, "topology": topology,
            "topology_label": self.topology_label, "n_devices": self.n_devices,
            "hardware": self.hardware, "model": self.model.as_dict(),
            "tp": [self.tp.d1, self.tp.d2, self.tp.placement], "pp": self.pp, "dp": self.dp,
            "micro_batch": self.micro_batch, "global_batch": self.global_batch,
            "schedule": self.schedule, "virtual_stages": self.virtual_stages,
            "chunks": self.chunks, "algorithm": self.algorithm,
            "sequence_parallel": self.sequence_parallel, "recompute": self.recompute,
            "zero": self.zero, "vocab": self.vocab, "order": list(self.order),
        } | self._contention()  # fmt: skip

    def _contention(self) -> dict[str, Any]:
        """The network, perturbation, partition, expert- and context-parallel and activation
        offloading keys, where not the defaults (so the points of scenarios from before issue
        13, even pipelines and jobs without expert or context parallelism or offloading keep
        their keys)."""
        out: dict[str, Any] = {}
        if self.offload_activations:
            out["offload_activations"] = True
        if self.cp != 1:
            out["cp"] = self.cp
        if self.ep != 1:
            out["ep"] = self.ep
        if self.partition != EVEN:
            out["partition"] = self.partition if isinstance(self.partition, str) else list(self.partition)
        if self.network != "joint":
            out["network"] = self.network
        if self.perturb:
            out["perturb"] = [[k, v] for k, v in self.perturb]
        if self.neighbour:
            out["neighbour"] = [[k, list(v) if isinstance(v, tuple) else v] for k, v in self.neighbour]
        return out

    @property
    def neighbour_label(self) -> str:
        """The neighbour job in a few words (``none`` without)."""
        if not self.neighbour:
            return "none"
        n = dict(self.neighbour)
        return f"{n['model']} tp{n['tp'][0]}x{n['tp'][1]} pp{n['pp']} dp{n['dp']}"

    @property
    def neighbour_devices(self) -> int:
        """GPUs of the neighbour job (0 without)."""
        if not self.neighbour:
            return 0
        n = dict(self.neighbour)
        return int(n["tp"][0] * n["tp"][1] * n["pp"] * n["dp"])

    @property
    def perturb_label(self) -> str:
        """The perturbation as ``key=value`` words (``none`` without)."""
        return " ".join(f"{k}={v}" for k, v in self.perturb) or "none"

    def key(self) -> str:
        """A stable identifier used to resume a sweep: the hex digest of the canonical JSON
        and of the contents of the files the point reads (:func:`point_key`)."""
        return point_key(self.as_dict(), self.topology, self.hardware)

    def columns(self, index: int) -> dict[str, Any]:
        """The results columns that describe this point, the *index*-th of its sweep (the
        point columns of the job schema)."""
        model, mesh = self.model, self.tp
        return {
            "scenario": self.scenario, "point_key": self.key(), "topology": self.topology_label,
            "hardware": self.hardware, "model": model.name, "hidden": model.hidden,
            "heads": model.heads, "layers": model.layers, "seq": model.seq, "vocab": self.vocab,
            "dtype": model.dtype, "n_devices": self.n_devices, "tp_scheme": self.tp_scheme,
            "d1": mesh.d1, "d2": mesh.d2, "tp_mesh": f"{mesh.d1}x{mesh.d2}", "tp": mesh.size,
            "pp": self.pp, "dp": self.dp, "order": ",".join(self.order),
            "placement": mesh.placement, "micro_batch": self.micro_batch,
            "global_batch": self.global_batch, "n_microbatches": self.n_microbatches,
            "schedule": self.schedule, "virtual_stages": self.virtual_stages,
            "chunks": self.chunks, "algorithm": self.algorithm,
            "sequence_parallel": self.sequence_parallel, "recompute": self.recompute,
            "zero": self.zero, "network": self.network, "perturb": self.perturb_label,
            "neighbour": self.neighbour_label, "cp": self.cp, "ep": self.ep,
            "partition": self.partition if isinstance(self.partition, str)
            else "/".join(map(str, self.partition)),
            "offload_activations": self.offload_activations, "point_index": index,
        }  # fmt: skip


#: :class:`JobConfig`'s fields a :class:`JobPoint` does not carry by the same name: the layout
#: (the point's *tp*, *pp*, *dp* and *order*) and DDP's gradient bucketing (JobConfig's
#: defaults for every point).
NOT_ON_POINT = frozenset({"layout", "bucket_bytes", "overlap_grad_reduce"})
#: The fields a JobPoint and its :class:`JobConfig` share by name (:meth:`JobPoint.config`,
#: :meth:`JobPoint.from_config`): every other field of JobConfig, so one added there is
#: carried by the points or named in :data:`NOT_ON_POINT` (a test holds the two to it).
CONFIG_FIELDS = tuple(f.name for f in fields(JobConfig) if f.name not in NOT_ON_POINT)
