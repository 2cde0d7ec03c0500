"""DeviceMesh(d1, d2) and its communication groups (paper Section 3.1).

Mesh position (i, j), i < d1, j < d2, sits on GPU ``placement[i * d2 + j]`` (row-major by
default). A collective "on dimension 1" runs in d2 groups of d1 GPUs (j fixed, i varies);
"on dimension 2" in d1 groups of d2 GPUs (i fixed, j varies). So DeviceMesh(N, 1) is
Megatron-LM's 1D tensor parallelism (one group of all N on dimension 1), and in
DeviceMesh(8, 2) on 4-GPU nodes the dimension-2 pairs (0,1), (2,3), ... stay inside a node,
as in the paper's Figure 7(a) discussion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from atpsim.errors import AtpsimError

Placement = Callable[[int, int], list[int]]
_PLACEMENTS: dict[str, Placement] = {}


def register_placement(name: str) -> Callable[[Placement], Placement]:
    """Register a placement: ``fn(d1, d2) -> GPU of each mesh position in row-major order``."""

    def decorate(fn: Placement) -> Placement:
        _PLACEMENTS[name] = fn
        return fn

    return decorate


@register_placement("row-major")
def row_major(d1: int, d2: int) -> list[int]:
    """Position (i, j) on GPU i*d2 + j: dimension-2 groups are runs of consecutive GPUs."""
    return list(range(d1 * d2))


@register_placement("column-major")
def column_major(d1: int, d2: int) -> list[int]:
    """Position (i, j) on GPU j*d1 + i: dimension-1 groups are runs of consecutive GPUs."""
    return [j * d1 + i for i in range(d1) for j in range(d2)]


def placement_names() -> list[str]:
    return sorted(_PLACEMENTS)


@dataclass(frozen=True)
class DeviceMesh:
    """A 2D device mesh of ``d1 * d2`` GPUs with a placement onto topology ranks."""

    d1: int
    d2: int
    placement: str = "row-major"

    def __post_init__(self) -> None:
        if self.d1 < 1 or self.d2 < 1:
            raise AtpsimError(f"mesh dimensions must be >= 1, got DeviceMesh({self.d1}, {self.d2})")
        if self.placement not in _PLACEMENTS:
            raise AtpsimError(
                f"unknown placement {self.placement!r}; expected one of {placement_names()}"
            )

    @property
    def size(self) -> int:
        return self.d1 * self.d2

    def __str__(self) -> str:
        return f"DeviceMesh({self.d1}, {self.d2})"

    def gpu_of(self) -> list[int]:
        """GPU rank of each mesh position, row-major over (i, j)."""
        return _PLACEMENTS[self.placement](self.d1, self.d2)

    def groups(self, dim: int) -> list[list[int]]:
        """GPU ranks of every group on mesh dimension *dim* (1 or 2), in mesh order."""
        gpu = self.gpu_of()
        if dim == 1:
            return [[gpu[i * self.d2 + j] for i in range(self.d1)] for j in range(self.d2)]
        if dim == 2:
            return [[gpu[i * self.d2 + j] for j in range(self.d2)] for i in range(self.d1)]
        raise AtpsimError(f"mesh dimension must be 1 or 2, got {dim}")

    def dim_size(self, dim: int) -> int:
        return self.d1 if dim == 1 else self.d2


def factorizations(n: int) -> list[DeviceMesh]:
    """Every DeviceMesh(d1, d2) with d1 * d2 == n, from (n, 1) down to (1, n)."""
    return [DeviceMesh(n // d2, d2) for d2 in range(1, n + 1) if n % d2 == 0]


def atp_mesh(n: int, i: int) -> DeviceMesh:
    """ATP-i: DeviceMesh(n / i, i), the paper's naming in Figures 11 and 12."""
    if n % i:
        raise AtpsimError(f"ATP-{i} needs the device count {n} to be divisible by {i}")
    return DeviceMesh(n // i, i)


def meshes_of(sizes: Sequence[tuple[int, int]]) -> list[DeviceMesh]:
    return [DeviceMesh(d1, d2) for d1, d2 in sizes]
