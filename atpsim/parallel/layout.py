"""A whole job's parallel layout: data x pipeline x tensor parallelism, placed on GPU ranks.

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
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.errors import SimulationError
from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh

DIMENSIONS = ("tp", "pp", "dp")


@dataclass(frozen=True)
class ParallelLayout:
    """``dp`` x ``pp`` x *tp* ranks, *order* innermost first (a permutation of tp, pp, dp)."""

    tp: DeviceMesh | Grid
    pp: int = 1
    dp: int = 1
    order: tuple[str, str, str] = DIMENSIONS

    def __post_init__(self) -> None:
        if sorted(self.order) != sorted(DIMENSIONS):
            raise SimulationError(f"expected an order of tp, pp and dp, got {list(self.order)}",
                                  key="order")  # fmt: skip
        for key, value in (("pp", self.pp), ("dp", self.dp)):
            if value < 1:
                raise SimulationError(f"expected {key} >= 1, got {value}", key=key)

    @property
    def size(self) -> int:
        """GPUs the job occupies."""
        return self.tp.size * self.pp * self.dp

    def rank(self, replica: int, stage: int, position: int) -> int:
        """The GPU rank of TP position *position* (a rank of ``tp``'s own numbering, placement
        included) of pipeline *stage* in data-parallel *replica*."""
        digits = {"tp": (position, self.tp.size), "pp": (stage, self.pp), "dp": (replica, self.dp)}
        rank, scale = 0, 1
        for name in self.order:
            digit, radix = digits[name]
            rank += digit * scale
            scale *= radix
        return rank

    def stage_ranks(self, replica: int, stage: int) -> list[int]:
        """The GPUs of one stage of one replica, in TP position order."""
        return [self.rank(replica, stage, t) for t in range(self.tp.size)]

    def tp_groups(self, dim: int) -> list[list[int]]:
        """Every TP group of mesh dimension *dim*, over all replicas and stages."""
        local = self.tp.groups(dim)
        return [[self.rank(r, s, t) for t in group]
                for r in range(self.dp) for s in range(self.pp) for group in local]  # fmt: skip

    def dp_groups(self) -> list[list[int]]:
        """Every data-parallel group: one stage and TP position across the replicas."""
        return [[self.rank(r, s, t) for r in range(self.dp)]
                for s in range(self.pp) for t in range(self.tp.size)]  # fmt: skip

    def send_pairs(self, src_stage: int, dst_stage: int) -> list[tuple[int, int]]:
        """(sender, receiver) GPU pairs from *src_stage* to *dst_stage*, every replica: each TP
        position sends its part of the activations to the same position of the other stage."""
        for stage in (src_stage, dst_stage):
            if not 0 <= stage < self.pp:
                raise SimulationError(f"stage {stage} is not one of the {self.pp} pipeline stages")
        return [(self.rank(r, src_stage, t), self.rank(r, dst_stage, t))
                for r in range(self.dp) for t in range(self.tp.size)]  # fmt: skip

    def stage_of(self, rank: int) -> int:
        """The pipeline stage GPU *rank* belongs to."""
        scale = 1
        for name in self.order:
            radix = {"tp": self.tp.size, "pp": self.pp, "dp": self.dp}[name]
            if name == "pp":
                return (rank // scale) % radix
            scale *= radix
        raise SimulationError("the layout's order has no pp")  # unreachable: order is checked
