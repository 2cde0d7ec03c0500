"""A whole job's parallel layout: data x pipeline x context x tensor parallelism, placed on GPU ranks.

A layout is ``dp`` replicas of a ``pp``-stage pipeline whose every stage is one tensor-parallel
mesh ``tp`` (an ATP DeviceMesh(d1, d2), Megatron-LM's 1D TP being DeviceMesh(t, 1), or a
SUMMA Grid). *order* names the dimensions innermost first: the default ``("tp", "pp", "dp")``
puts each TP group on consecutive ranks (inside a node, as Megatron-LM does by default, so
its heavy collectives stay on NVLink), then the stages, then the replicas. The rank of
(replica r, stage s, TP position t) is the mixed-radix number with those digits.

Every group of the job is then a list of GPU ranks of the topology: the TP groups of each mesh
dimension in every (replica, stage), the point-to-point neighbours between consecutive stages,
and the data-parallel groups (the same stage and TP position in every replica), over which
gradients are all-reduced (or reduce-scattered and all-gathered with ZeRO).

Expert parallelism (``ep``, Megatron-Core's ``expert_model_parallel_size``) is carved out of the
data-parallel replicas, as Megatron-Core does: ``ep`` divides ``dp``, and each expert-parallel
group is ``ep`` consecutive replicas' ranks of the same stage and TP position (Megatron-Core's
default order ``tp-cp-ep-dp-pp`` puts EP inside DP). The experts of an MoE layer are split over
the group, which exchanges tokens by all-to-all (:mod:`atpsim.parallel.moe`); the dense part
keeps its ``dp``-way data parallelism, and the experts' gradients are reduced over the
``dp/ep`` replicas that hold the same experts (:meth:`ParallelLayout.expert_dp_groups`).

Context parallelism (``cp``, Megatron-LM's ``--context-parallel-size``; Megatron-Core's
context-parallel docs) splits every sequence over ``cp`` ranks of one replica: each runs the
replica's pipeline on its share of the tokens (:mod:`atpsim.parallel.context`), so a replica
is ``cp`` pipelines, the job's :attr:`ParallelLayout.replicas` is ``dp·cp`` and its size
``tp·cp·pp·dp``. A pipeline replica index ``q`` is ``d·cp + c`` (data-parallel replica ``d``,
context-parallel rank ``c``). An *order* of tp, pp and dp places cp right after tp (innermost
first ``tp, cp, pp, dp`` by default: Megatron-Core's order ``tp-cp-ep-dp-pp`` puts CP next to
TP, so a ring's KV exchange stays near its TP group); an order may also name all four. The
context-parallel groups (:meth:`ParallelLayout.cp_groups`) are the ``cp`` ranks of one
replica, stage and TP position, whose ring attention sends each KV block to the next rank of
the group; gradients are reduced over the ``dp·cp`` pipelines
(:meth:`ParallelLayout.dp_groups`), as Megatron-Core reduces them over its
data-and-context-parallel group. With ``cp`` = 1 every rank and group is as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from atpsim.errors import SimulationError
from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh

DIMENSIONS = ("tp", "pp", "dp")
#: Every dimension an order may name: an order of :data:`DIMENSIONS` places cp after tp.
ORDER_NAMES = ("tp", "cp", "pp", "dp")


@dataclass(frozen=True)
class ParallelLayout:
    """``dp`` x ``pp`` x *tp* ranks, *order* innermost first (a permutation of tp, pp, dp, or
    of tp, cp, pp, dp); *ep* expert-parallel replicas out of the ``dp``; *cp* context-parallel
    ranks per replica (module docstring; 1: none)."""

    tp: DeviceMesh | Grid
    pp: int = 1
    dp: int = 1
    order: tuple[str, ...] = DIMENSIONS
    ep: int = field(default=1, kw_only=True)
    cp: int = field(default=1, kw_only=True)

    def __post_init__(self) -> None:
        if sorted(self.order) not in (sorted(DIMENSIONS), sorted(ORDER_NAMES)):
            raise SimulationError(f"expected an order of tp, pp and dp (and cp), got {list(self.order)}",
                                  key="order")  # fmt: skip
        for key, value in (("pp", self.pp), ("dp", self.dp), ("ep", self.ep), ("cp", self.cp)):
            if value < 1:
                raise SimulationError(f"expected {key} >= 1, got {value}", key=key)
        if self.dp % self.ep:
            raise SimulationError(f"ep {self.ep} does not divide dp {self.dp}: expert parallelism "
                                  "is carved out of the data-parallel replicas", key="ep")  # fmt: skip
        if self.cp > 1 and self.ep > 1:
            raise SimulationError(f"cp {self.cp} with ep {self.ep}: context parallelism beside expert "
                                  "parallelism is not modelled", key="cp")  # fmt: skip

    @property
    def size(self) -> int:
        """GPUs the job occupies: ``tp·cp·pp·dp``."""
        return self.tp.size * self.pp * self.dp * self.cp

    @property
    def replicas(self) -> int:
        """Pipelines the job runs: ``dp·cp`` (each context-parallel rank of a replica runs its
        share of every sequence through the pipeline)."""
        return self.dp * self.cp

    @property
    def full_order(self) -> tuple[str, ...]:
        """*order* with cp: as given, or cp placed right after tp (module docstring)."""
        if "cp" in self.order:
            return self.order
        at = self.order.index("tp") + 1
        return (*self.order[:at], "cp", *self.order[at:])

    @cached_property
    def ranks(self) -> np.ndarray:
        """Every GPU rank as ``ranks[replica, stage, position]`` (:meth:`rank`, computed at
        once: the groups of a job of 16,384 GPUs are 65,536 ranks, asked for again and again)."""
        replica, stage, position = np.indices((self.replicas, self.pp, self.tp.size), dtype=np.int64)
        dp_replica, cp_rank = np.divmod(replica, self.cp)
        digits = {"tp": (position, self.tp.size), "cp": (cp_rank, self.cp), "pp": (stage, self.pp),
                  "dp": (dp_replica, self.dp)}  # fmt: skip
        rank, scale = np.full_like(replica, self.first_rank), 1
        for name in self.full_order:
            digit, radix = digits[name]
            rank += digit * scale
            scale *= radix
        rank.flags.writeable = False
        return rank

    @property
    def first_rank(self) -> int:
        """The topology rank of the layout's rank 0: 0, or where a job is placed after another
        (:class:`~atpsim.training.fabric.OffsetLayout`) its offset."""
        return 0

    def rank(self, replica: int, stage: int, position: int) -> int:
        """The GPU rank of TP position *position* (a rank of ``tp``'s own numbering, placement
        included) of pipeline *stage* in pipeline replica *replica* (``d·cp + c``: data-parallel
        replica ``d``, context-parallel rank ``c``; the data-parallel replica when cp is 1)."""
        dp_replica, cp_rank = divmod(replica, self.cp)
        digits = {"tp": (position, self.tp.size), "cp": (cp_rank, self.cp), "pp": (stage, self.pp),
                  "dp": (dp_replica, self.dp)}  # fmt: skip
        rank, scale = self.first_rank, 1
        for name in self.full_order:
            digit, radix = digits[name]
            rank += digit * scale
            scale *= radix
        return rank

    def stage_ranks(self, replica: int, stage: int) -> list[int]:
        """The GPUs of one stage of one replica, in TP position order."""
        return self.ranks[replica, stage].tolist()

    def tp_groups(self, dim: int) -> list[list[int]]:
        """Every TP group of mesh dimension *dim*, over all replicas and stages."""
        local = np.array(self.tp.groups(dim), dtype=np.int64)
        return self.ranks[:, :, local].reshape(-1, local.shape[1]).tolist()

    def dp_groups(self) -> list[list[int]]:
        """Every data-parallel group: one stage and TP position across the replicas (with
        context parallelism, across all ``dp·cp`` pipelines: Megatron-Core reduces the
        gradients over the data-and-context-parallel group)."""
        return self.ranks.transpose(1, 2, 0).reshape(-1, self.replicas).tolist()

    def cp_groups(self) -> list[list[int]]:
        """Every context-parallel group: the ``cp`` ranks of one replica, stage and TP
        position, in ring order; replicas outermost, then stages, then TP positions."""
        return [[self.rank(d * self.cp + c, s, t) for c in range(self.cp)]
                for d in range(self.dp) for s in range(self.pp) for t in range(self.tp.size)]  # fmt: skip

    def ep_groups(self) -> list[list[int]]:
        """Every expert-parallel group: ``ep`` consecutive replicas' ranks of one stage and TP
        position, replica blocks outermost, then stages, then TP positions."""
        return [[self.rank(block * self.ep + j, s, t) for j in range(self.ep)]
                for block in range(self.dp // self.ep) for s in range(self.pp)
                for t in range(self.tp.size)]  # fmt: skip

    def expert_dp_groups(self) -> list[list[int]]:
        """Every group over which the experts' gradients are reduced: the ``dp/ep`` replicas
        that hold the same experts (the same place in their expert-parallel group), one per
        stage, TP position and place; the data-parallel groups when ``ep`` is 1."""
        return [[self.rank(block * self.ep + j, s, t) for block in range(self.dp // self.ep)]
                for s in range(self.pp) for t in range(self.tp.size) for j in range(self.ep)]  # fmt: skip

    def send_pairs(self, src_stage: int, dst_stage: int) -> list[tuple[int, int]]:
        """(sender, receiver) GPU pairs from *src_stage* to *dst_stage*, every pipeline replica
        (``dp·cp``): each TP position sends its part of the activations to the same position
        of the other stage."""
        for stage in (src_stage, dst_stage):
            if not 0 <= stage < self.pp:
                raise SimulationError(f"stage {stage} is not one of the {self.pp} pipeline stages")
        return [(self.rank(r, src_stage, t), self.rank(r, dst_stage, t))
                for r in range(self.replicas) for t in range(self.tp.size)]  # fmt: skip

    def stage_of(self, rank: int) -> int:
        """The pipeline stage GPU *rank* belongs to."""
        scale = 1
        for name in self.full_order:
            radix = {"tp": self.tp.size, "cp": self.cp, "pp": self.pp, "dp": self.dp}[name]
            if name == "pp":
                return (rank // scale) % radix
            scale *= radix
        raise SimulationError("the layout's order has no pp")  # unreachable: order is checked
