"""Expert parallelism in a job: what the experts add to a stage's parameters, optimizer step
and calls (:mod:`atpsim.parallel.moe`; the job's sizes are checked by
:func:`~atpsim.training.config.check_job`).

Megatron-Core's layout (:mod:`atpsim.parallel.layout`): the ``ep`` replicas of an
expert-parallel group split the experts, so a rank holds ``E/ep`` experts of each MoE layer;
the dense part (attention, routers, norms, embeddings) is replicated over all ``dp`` replicas
and the experts over the ``dp/ep`` that hold the same ones. With ZeRO-1 (the distributed
optimizer) each part's optimizer state is sharded over its own data-parallel group.
"""

from __future__ import annotations

from dataclasses import replace

from atpsim.errors import SimulationError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import expert_params_per_rank
from atpsim.training.config import JobConfig


def stage_expert_params_per_rank(config: JobConfig, stage: int) -> float:
    """Parameters of the experts one TP rank of *stage* holds (0 for a dense model)."""
    layout, model = config.layout, config.model
    layers = config.stage_layers[stage]
    if not model.is_moe or not layers:
        return 0.0
    mesh = layout.tp if isinstance(layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    return expert_params_per_rank(replace(model, layers=layers), mesh.d1, mesh.d2, layout.ep)


def optimizer_shard(config: JobConfig, params: float, expert_params: float) -> float:
    """Parameters one rank's Adam step updates: all of its *params* without ZeRO; with ZeRO-1
    the dense ones over ``dp`` and the *expert_params* over ``dp/ep``. A dense model's
    ``params / dp``, as before expert parallelism (``dp·cp`` with context parallelism: the
    distributed optimizer shards over the data-and-context-parallel group)."""
    dp, ep = config.layout.replicas, config.layout.ep
    if not config.zero:
        return params
    if ep == 1 or not expert_params:
        return params / dp
    return (params - expert_params) / dp + expert_params / (dp // ep)


def check_unperturbed(config: JobConfig, perturbed: bool) -> None:
    """A perturbed expert-parallel job is refused (key ``perturb``): a slow rank's stage is
    timed on its own replica, and the all-to-alls span replicas."""
    if perturbed and config.layout.ep > 1:
        raise SimulationError("a perturbation of an expert-parallel job (ep > 1) is not modelled: "
                              "its all-to-alls span replicas", key="perturb")  # fmt: skip
