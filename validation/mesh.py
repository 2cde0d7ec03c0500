"""DeviceMesh(d1, d2) process groups for the ATP kernels (paper Section 3.1, Figure 9's ``init_mesh``).

Built on :func:`torch.distributed.device_mesh.init_device_mesh`. The convention is the one of
:mod:`atpsim.parallel.mesh`: mesh position (i, j), i < d1, j < d2, is rank ``i * d2 + j``
(torch's row-major mesh). A collective "on dimension 1" runs in the d2 groups of d1 ranks with
j fixed (torch mesh dimension ``"d1"``); "on dimension 2" in the d1 groups of d2 consecutive
ranks with i fixed (``"d2"``). So DeviceMesh(N, 1) is Megatron-LM's 1D tensor parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from atpsim.api import factorizations

DIM_NAMES = ("d1", "d2")


@dataclass(frozen=True)
class ATPMesh:
    """A 2D torch DeviceMesh with the paper's dimension numbering (1 and 2, not 0 and 1)."""

    device_mesh: DeviceMesh

    @property
    def d1(self) -> int:
        return self.device_mesh.size(0)

    @property
    def d2(self) -> int:
        return self.device_mesh.size(1)

    @property
    def device_type(self) -> str:
        return self.device_mesh.device_type

    def size(self, dim: int) -> int:
        """Number of ranks in each group of mesh dimension *dim* (1 or 2)."""
        return self.device_mesh.size(_index(dim))

    def group(self, dim: int) -> dist.ProcessGroup:
        """This rank's process group on mesh dimension *dim* (1 or 2)."""
        return self.device_mesh.get_group(DIM_NAMES[_index(dim)])

    def coordinate(self) -> tuple[int, int]:
        """This rank's mesh position (i, j)."""
        coordinate = self.device_mesh.get_coordinate()
        if coordinate is None:
            raise RuntimeError("this rank is not part of the mesh")
        return coordinate[0], coordinate[1]

    def device(self) -> torch.device:
        """The device this rank computes on: its CUDA device, or the CPU."""
        if self.device_type == "cuda":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device(self.device_type)

    def __str__(self) -> str:
        return f"DeviceMesh({self.d1}, {self.d2})"


def _index(dim: int) -> int:
    if dim not in (1, 2):
        raise ValueError(f"mesh dimension must be 1 or 2, got {dim}")
    return dim - 1


def init_mesh(d1: int, d2: int, device_type: str | None = None) -> ATPMesh:
    """Build DeviceMesh(*d1*, *d2*) over the initialised default process group.

    *device_type* defaults to ``"cuda"`` when CUDA is available, else ``"cpu"``. Every rank must
    call this with the same arguments, and the world size must be ``d1 * d2``.
    """
    if d1 < 1 or d2 < 1:
        raise ValueError(f"mesh dimensions must be >= 1, got DeviceMesh({d1}, {d2})")
    world = dist.get_world_size()
    if d1 * d2 != world:
        raise ValueError(f"DeviceMesh({d1}, {d2}) needs {d1 * d2} ranks, the world has {world}")
    if device_type is None:
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    return ATPMesh(init_device_mesh(device_type, (d1, d2), mesh_dim_names=DIM_NAMES))


def mesh_shapes(world_size: int) -> list[tuple[int, int]]:
    """Every (d1, d2) with d1 * d2 == *world_size*, from (N, 1) down to (1, N)."""
    return [(mesh.d1, mesh.d2) for mesh in factorizations(world_size)]
