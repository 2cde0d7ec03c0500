"""A job scenario expanded into :class:`~atpsim.scenario.job_point.JobPoint`: the cartesian
product of its axes, every size checked before anything is simulated.

Axes, outermost first (the order of the points): topology, hardware, model, devices, cp
(context parallelism), TP mesh (``tp.meshes`` resolved per size), pp, dp (``auto``:
devices / (tp·cp·pp)), micro_batch,
global_batch, ep, schedule, virtual_stages, sequence_parallel, recompute, zero, placement, chunks,
algorithm, network, perturb, partition, offload_activations. Identical points appear once: ``sequence_parallel: true`` applies to Megatron-LM's
1D meshes only (Korthikanti et al. 2022 define it for 1D TP), so a 2D mesh's point runs
without it, and two combinations that differ only there are one point. Likewise
``virtual_stages`` above 1 pairs only with the interleaved schedule, and a perturbation only
with the joint network (``network: isolated`` points are unperturbed).

Every layout that cannot run is one :class:`ScenarioError` naming its key: a TP x PP x DP
layout that does not fill the devices, a pipeline deeper than the layers or not dividing
them (``partition: even``), a partition's counts that do not match a depth or the layers, or
an uneven partition with virtual stages, a global batch that micro-batch x dp does not divide, and so on.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from typing import Any

from atpsim.compute.hardware import hardware_profile, topology_hardware
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.compute.timing import check_model_dtype
from atpsim.errors import AtpsimError
from atpsim.parallel.atp import kv_heads_split
from atpsim.parallel.job_memory import check_slots
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.partition import EVEN, check_partition, show_partition
from atpsim.scenario.entries import ModelEntry
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.parallelism import Parallelism
from atpsim.scenario.schema import Scenario
from atpsim.scenario.topologies import scenario_error, sized_topologies
from atpsim.training import layouts
from atpsim.training.config import runs_sequence_parallel
from atpsim.training.defaults import model_vocab

INTERLEAVED = layouts.INTERLEAVED


def expand_job_sweep(scenario: Scenario) -> list[JobPoint]:
    """Every point of the job *scenario*, in axis order (see the module docstring); with
    ``cases``, the points of each case in turn (a point two cases share, once). Raises
    :class:`ScenarioError` naming the file and key of the first layout that cannot run."""
    points: dict[str, JobPoint] = {}
    for part in scenario.parts():
        for point in _part_points(part):
            points.setdefault(point.key(), point)
    return list(points.values())


def _part_points(part: Scenario) -> Iterator[JobPoint]:
    _check_neighbour(part)
    _check_network(part)
    for index, entry in enumerate(part.topologies):
        sized = sized_topologies(part, index)
        default_hardware = topology_hardware(sized[0][2])
        base = {"scenario": part.name, "topology": entry.spec_mapping(),
                "topology_label": entry.label()}  # fmt: skip
        for hardware in part.hardware or (default_hardware,):
            for model_entry in part.models:
                model = model_entry.config()
                _check_model(part, model)
                _check_experts(part, model)
                _check_context(part, model)
                _check_dtype(part, model, hardware)
                vocab = _vocab(part.parallelism, model_entry)
                for _, devices, _topology in sized:
                    _check_stragglers(part, devices)
                    fields = {**base, "hardware": hardware, "model": model,
                              "n_devices": devices, "vocab": vocab}  # fmt: skip
                    yield from _layouts(part, fields, model, devices)


def _vocab(parallelism: Parallelism, entry: ModelEntry) -> int:
    """``parallelism.vocab``, else the model's ``vocab``, else the model preset's padded
    vocabulary, else 0 (no embedding and LM head): :func:`~atpsim.training.defaults.model_vocab`."""
    if parallelism.vocab is not None:
        return parallelism.vocab
    return model_vocab(entry.config(), entry.preset)


def _check_model(part: Scenario, model: ModelConfig) -> None:
    """Pipeline depths, partitions and virtual stages against the model's layers."""
    par = part.parallelism
    _check_partitions(part, model)
    for k, pp in enumerate(par.pp):
        if pp > model.layers:
            message = f"{pp} stages exceed the model's {model.layers} layers (model {model.name!r})"
            raise scenario_error(part, message, "parallelism", "pp", k)
        if EVEN not in par.partition:
            continue
        if model.layers % pp:
            message = (f"{model.layers} layers (model {model.name!r}) do not split over {pp} "
                       "stages; expected a divisor of the layers")  # fmt: skip
            raise scenario_error(part, message, "parallelism", "pp", k)
        for j, virtual in enumerate(par.virtual_stages):
            if model.layers % (pp * virtual):
                message = (f"{model.layers} layers (model {model.name!r}) do not split over "
                           f"{pp} stages x {virtual} virtual stages")  # fmt: skip
                raise scenario_error(part, message, "parallelism", "virtual_stages", j)
    if any(v > 1 for v in par.virtual_stages) and INTERLEAVED not in par.schedule:
        message = "virtual stages above 1 need the interleaved schedule; expected 'interleaved' in schedule"
        raise scenario_error(part, message, "parallelism", "virtual_stages")


def _check_partitions(part: Scenario, model: ModelConfig) -> None:
    """Each listed partition's counts sum to the layers and name every depth's stages (one
    list of counts pairs with a depth of its length only); an uneven partition takes no
    virtual stages (:func:`~atpsim.parallel.partition.check_partition`)."""
    par = part.parallelism
    key = ("parallelism", "partition")
    for k, partition in enumerate(par.partition):
        index = (k,) if len(par.partition) > 1 else ()
        depths = [len(partition)] if isinstance(partition, tuple) else par.pp
        try:
            for pp, virtual in product(depths, par.virtual_stages):
                if partition != EVEN:
                    check_partition(partition, model.layers, pp, virtual)
        except AtpsimError as error:
            raise scenario_error(part, f"{error.message} (model {model.name!r})", *key, *index) from None
        if isinstance(partition, tuple) and any(pp != len(partition) for pp in par.pp):
            message = (f"partition {list(partition)} names {len(partition)} stages; expected pp: "
                       f"{len(partition)} (pp is {', '.join(map(str, par.pp))})")  # fmt: skip
            raise scenario_error(part, message, *key, *index)


def tp_meshes(part: Scenario, devices: int, model: ModelConfig) -> list[DeviceMesh]:
    """The TP meshes of ``parallelism.tp`` for *model* on *devices* GPUs
    (:func:`atpsim.training.layouts.tp_meshes`): the listed ones (checked), then, for ``all`` /
    ``atp-opt``, every factorization of each ``tp.size`` (checked to divide the devices) whose
    d1 and d2 divide the hidden size; a search keeps the others to prune and count them."""
    tp = part.parallelism.tp
    listed = [_listed_mesh(part, DeviceMesh(choice.d1, choice.d2), devices, model, k)
              for k, choice in enumerate(tp.meshes) if choice.kind == "size"]  # fmt: skip
    sizes: tuple[int, ...] = ()
    if any(choice.kind in ("all", "opt") for choice in tp.meshes):
        for j, size in enumerate(tp.size):
            if devices % size:
                message = f"a TP group of {size} GPUs does not divide the {devices} devices"
                raise scenario_error(part, message, "parallelism", "tp", "size", j)
        sizes = tuple(tp.size)
    meshes = layouts.tp_meshes(devices, sizes=sizes, listed=listed, split_hidden=model.hidden)
    meshes = [m for m in meshes if model.heads % m.size == 0 and kv_heads_split(model, m.size)]
    if not meshes:
        message = (f"no TP mesh of these sizes divides model.hidden = {model.hidden}, "
                   f"model.heads = {model.heads}"
                   + (f" and model.kv_heads = {model.n_kv_heads}" if model.kv_heads else "")
                   + f" (model {model.name!r})")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "tp")
    return meshes


def _listed_mesh(part: Scenario, mesh: DeviceMesh, devices: int, model: ModelConfig, k: int
                 ) -> DeviceMesh:
    if devices % mesh.size:
        message = f"TP mesh {mesh.d1}x{mesh.d2} ({mesh.size} GPUs) does not divide the {devices} devices"
        raise scenario_error(part, message, "parallelism", "tp", "meshes", k)
    for dim, size in ((1, mesh.d1), (2, mesh.d2)):
        if model.hidden % size:
            message = (f"TP mesh {mesh.d1}x{mesh.d2} splits model.hidden = {model.hidden} (model "
                       f"{model.name!r}) {size} ways on dimension {dim}; expected d1 and d2 to "
                       "divide the hidden size")  # fmt: skip
            raise scenario_error(part, message, "parallelism", "tp", "meshes", k)
    if model.heads % mesh.size:
        message = (f"TP mesh {mesh.d1}x{mesh.d2} splits model.heads = {model.heads} (model "
                   f"{model.name!r}) over {mesh.size} ranks; expected a TP size that divides the "
                   "heads (a search prunes such a mesh)")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "tp", "meshes", k)
    if not kv_heads_split(model, mesh.size):
        message = (f"TP mesh {mesh.d1}x{mesh.d2} splits model.kv_heads = {model.n_kv_heads} (model "
                   f"{model.name!r}) over {mesh.size} ranks; grouped-query attention needs a TP "
                   "size that divides kv_heads")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "tp", "meshes", k)
    if model.ffn_size % mesh.d1:
        message = (f"TP mesh {mesh.d1}x{mesh.d2} splits model.ffn_hidden = {model.ffn_size} (model "
                   f"{model.name!r}) {mesh.d1} ways on dimension 1; expected d1 to divide it")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "tp", "meshes", k)
    return mesh


def _dps(part: Scenario, devices: int, mesh: DeviceMesh, pp: int, cp: int = 1) -> list[int]:
    """The data-parallel degrees of ``parallelism.dp`` for *mesh* x *cp* x *pp* on *devices* GPUs."""
    par = part.parallelism
    stages = mesh.size * cp * pp
    named = f"TP {mesh.d1}x{mesh.d2}" + (f" x cp {cp}" if cp > 1 else "") + f" x pp {pp}"
    if par.dp is None:
        if devices % stages:
            message = f"{named} = {stages} GPUs do not divide the {devices} devices (dp: auto)"
            raise scenario_error(part, message, "parallelism", "pp", par.pp.index(pp))
        return [devices // stages]
    for k, dp in enumerate(par.dp):
        if stages * dp != devices:
            message = (f"{named} x dp {dp} = {stages * dp} GPUs; "
                       f"expected the {devices} devices (or dp: auto)")  # fmt: skip
            raise scenario_error(part, message, "parallelism", "dp", k)
    return list(par.dp)


def _layouts(part: Scenario, fields: dict[str, Any], model: ModelConfig, devices: int
             ) -> Iterator[JobPoint]:  # fmt: skip
    """The points of the part's whole-job layouts (:func:`atpsim.training.layouts.layout_grid`,
    in the module docstring's axis order), each checked before it is made."""
    par = part.parallelism
    axes = {"ep": par.ep, "schedule": par.schedule, "virtual_stages": par.virtual_stages,
            "sequence_parallel": par.sequence_parallel, "recompute": par.recompute, "zero": par.zero,
            "placement": par.placement, "chunks": part.chunks, "algorithm": part.algorithm,
            "network": par.network, "perturb": par.perturb, "partition": par.partition,
            "offload_activations": par.offload_activations}  # fmt: skip
    meshes = tp_meshes(part, devices, model)
    for cp in par.cp:

        def dps_of(mesh: DeviceMesh, pp: int, cp: int = cp) -> list[int]:
            return _dps(part, devices, mesh, pp, cp)

        grid = layouts.layout_grid(meshes, par.pp, dps_of, par.micro_batch, par.global_batch,
                                   {"cp": (cp,), **axes})  # fmt: skip
        for layout in grid:
            _check_layout(part, layout)
            point = _point(part, fields, layout)
            if point is not None:
                yield point


def _check_layout(part: Scenario, layout: layouts.Layout) -> None:
    """The batch over micro-batches and replicas, the interleaved schedule's micro-batches over
    its stages and the iteration's size (each a ScenarioError naming its key)."""
    mb, gb, schedule = layout.micro_batch, layout.global_batch, layout.fields["schedule"]
    _check_batch(part, mb, gb, layout.dp)
    _check_ep(part, layout.fields["ep"], layout.dp)
    _check_interleaved(part, schedule, gb // (mb * layout.dp), layout.pp)
    too_large = check_slots(layout.pp, layout.fields["virtual_stages"], gb, mb)
    if too_large:
        raise scenario_error(part, too_large, "parallelism", "global_batch", part.parallelism.global_batch.index(gb))


def _point(part: Scenario, fields: dict[str, Any], layout: layouts.Layout) -> JobPoint | None:
    """The point of one layout, or None for an isolated network's where a perturbation or a
    neighbour needs the joint one; chunks that split the micro-batch unevenly are refused."""
    par, values, mesh, mb = part.parallelism, layout.fields, layout.mesh, layout.micro_batch
    perturb, chunks = values["perturb"], values["chunks"]
    if values["network"] == "isolated" and (perturb.canonical() or par.neighbour is not None):
        return None
    if mb % chunks:
        message = f"{chunks} chunks split a micro-batch of {mb} unevenly; expected a divisor"
        raise scenario_error(part, message, "chunks", part.chunks.index(chunks))
    return JobPoint(**fields, tp=DeviceMesh(mesh.d1, mesh.d2, values["placement"]), pp=layout.pp,
                    dp=layout.dp, cp=values["cp"], ep=values["ep"], micro_batch=mb, global_batch=layout.global_batch,
                    schedule=values["schedule"], virtual_stages=values["virtual_stages"],
                    chunks=chunks, algorithm=values["algorithm"],
                    sequence_parallel=values["sequence_parallel"] and runs_sequence_parallel(mesh, fields["model"].seq),
                    recompute=values["recompute"], zero=values["zero"], order=par.order,
                    network=values["network"], perturb=perturb.canonical(),
                    neighbour=par.neighbour.canonical() if par.neighbour else (),
                    partition=values["partition"], offload_activations=values["offload_activations"])  # fmt: skip


def _check_network(part: Scenario) -> None:
    """A perturbation or a neighbour needs the joint network: with ``network: isolated``
    alone such points would all be skipped (a sweep of both runs them on the joint one)."""
    par = part.parallelism
    if "joint" in par.network:
        return
    if any(p.canonical() for p in par.perturb):
        raise scenario_error(part, "a perturbation needs the joint network; expected network: joint "
                     "(or a list with it)", "parallelism", "perturb")  # fmt: skip
    if par.neighbour is not None:
        raise scenario_error(part, "a neighbour job needs the joint network; expected network: joint "
                     "(or a list with it)", "parallelism", "neighbour")  # fmt: skip


def _check_stragglers(part: Scenario, devices: int) -> None:
    """Stragglers are drawn among the job's GPUs: no more than there are."""
    for index, perturb in enumerate(part.parallelism.perturb):
        if perturb.stragglers > devices:
            key = ("parallelism", "perturb") + ((index,) if len(part.parallelism.perturb) > 1 else ())
            raise scenario_error(part, f"{perturb.stragglers} stragglers among {devices} GPUs; expected at "
                         f"most {devices}", *key, "stragglers")  # fmt: skip


def _check_neighbour(part: Scenario) -> None:
    """The neighbour job's model is a preset."""
    neighbour = part.parallelism.neighbour
    if neighbour is None:
        return
    try:
        model_preset(neighbour.model)
    except AtpsimError as error:
        raise scenario_error(part, str(error), "parallelism", "neighbour", "model") from None


def _check_dtype(part: Scenario, model: ModelConfig, hardware: str) -> None:
    """The model's dtype has a peak on the hardware (fp8 is refused on an A100)."""
    try:
        check_model_dtype(hardware_profile(hardware), model)
    except AtpsimError as error:
        raise scenario_error(part, f"{error.message} (model {model.name!r})", "model", "dtype") from None


def _check_experts(part: Scenario, model: ModelConfig) -> None:
    """``parallelism.ep`` against the model: a dense model takes none above 1, and each value
    divides the experts; ``model.moe_every`` divides every (virtual) stage's layers."""
    par = part.parallelism
    for k, ep in enumerate(par.ep):
        if ep > 1 and not model.is_moe:
            message = (f"ep {ep}: model {model.name!r} is dense (model.experts = 0); expert "
                       "parallelism needs a mixture of experts")  # fmt: skip
            raise scenario_error(part, message, "parallelism", "ep", k)
        if model.is_moe and model.experts % ep:
            message = f"ep {ep} does not divide the {model.experts} experts of model {model.name!r}"
            raise scenario_error(part, message, "parallelism", "ep", k)
    for pp, virtual in ((pp, v) for pp in par.pp for v in par.virtual_stages):
        if model.is_moe and (model.layers // (pp * virtual)) % model.moe_every:
            message = (f"model.moe_every {model.moe_every} does not divide the "
                       f"{model.layers // (pp * virtual)} layers of a model chunk ({pp} stages x "
                       f"{virtual} virtual; model {model.name!r})")  # fmt: skip
            raise scenario_error(part, message, "model", "moe_every")


def _check_context(part: Scenario, model: ModelConfig) -> None:
    """``parallelism.cp`` against the model and the other keys: each value splits the sequence
    into ``2·cp`` chunks (two per rank, load-balanced for causal attention), and above 1 it
    takes no expert parallelism and no perturbation (neither is modelled with it)."""
    par = part.parallelism
    for k, cp in enumerate(par.cp):
        if model.seq % (2 * cp):
            message = (f"cp {cp}: model.seq {model.seq} (model {model.name!r}) does not split into "
                       f"2·cp = {2 * cp} chunks; context parallelism gives each rank two chunks")  # fmt: skip
            raise scenario_error(part, message, "parallelism", "cp", k)
        if cp > 1 and any(ep > 1 for ep in par.ep):
            message = f"cp {cp} with ep above 1: context parallelism beside expert parallelism is not modelled"
            raise scenario_error(part, message, "parallelism", "cp", k)
        if cp > 1 and any(p.canonical() for p in par.perturb):
            message = f"cp {cp} with a perturbation: a context-parallel job's perturbation is not modelled"
            raise scenario_error(part, message, "parallelism", "cp", k)


def _check_ep(part: Scenario, ep: int, dp: int) -> None:
    """Expert parallelism is carved out of the data-parallel replicas: *ep* divides *dp*."""
    if dp % ep:
        message = f"ep {ep} does not divide dp {dp}: expert parallelism is carved out of the replicas"
        raise scenario_error(part, message, "parallelism", "ep", part.parallelism.ep.index(ep))


def _check_batch(part: Scenario, mb: int, gb: int, dp: int) -> None:
    if gb % (mb * dp):
        message = (f"{gb} samples do not split into micro-batches of {mb} over {dp} replicas; "
                   f"expected a multiple of micro_batch x dp = {mb * dp}")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "global_batch", part.parallelism.global_batch.index(gb))


def _check_interleaved(part: Scenario, schedule: str, n_microbatches: int, pp: int) -> None:
    if schedule == INTERLEAVED and n_microbatches % pp:
        message = (f"the interleaved schedule needs the micro-batches per replica "
                   f"({n_microbatches}) to be a multiple of the {pp} stages")  # fmt: skip
        raise scenario_error(part, message, "parallelism", "schedule", part.parallelism.schedule.index(schedule))


def job_axes(scenario: Scenario) -> list[tuple[str, str]]:
    """(axis, values) of a job scenario, as ``atpsim run`` announces them."""
    par = scenario.parallelism
    meshes = ", ".join(str(c) for c in par.tp.meshes)
    if any(c.kind in ("all", "opt") for c in par.tp.meshes):
        meshes += f" (of {', '.join(map(str, par.tp.size))} GPUs)"
    devices = par.devices

    def listed(values: tuple[Any, ...]) -> str:
        return ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)

    return [
        ("topology", ", ".join(entry.label() for entry in scenario.topologies)),
        ("hardware", ", ".join(scenario.hardware) if scenario.hardware else "topology default"),
        ("model", ", ".join(entry.config().name for entry in scenario.models)),
        ("devices", listed(devices) if devices else "all GPUs of the topology"),
        ("tp", meshes),
        ("pp", listed(par.pp)),
        ("dp", listed(par.dp) if par.dp else "auto"),
        ("ep", listed(par.ep)),
        ("micro_batch", listed(par.micro_batch)),
        ("global_batch", listed(par.global_batch)),
        ("schedule", listed(par.schedule)),
        ("virtual", listed(par.virtual_stages)),
        ("seq. par.", listed(par.sequence_parallel) + " (1D TP only)"),
        ("recompute", listed(par.recompute)),
        ("zero", listed(par.zero)),
        ("chunks", listed(scenario.chunks)),
        ("algorithm", listed(scenario.algorithm)),
        ("network", listed(par.network)),
        ("neighbour", par.neighbour.model if par.neighbour else "none"),
        ("perturb", "; ".join(" ".join(f"{k}={v}" for k, v in p.canonical()) or "none"
                              for p in par.perturb)),
    ] + _optional_axes(par, listed)


def _optional_axes(par: Parallelism, listed: Any) -> list[tuple[str, str]]:
    """The axes ``atpsim run`` names only where a scenario sets them: cp, partition and
    activation offloading."""
    out = [("cp", listed(par.cp))] if par.cp != (1,) else []
    if par.partition != (EVEN,):
        out.append(("partition", ", ".join(map(show_partition, par.partition))))
    if par.offload_activations != (False,):
        out.append(("offload", listed(par.offload_activations)))
    return out
