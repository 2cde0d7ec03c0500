"""Grid(q, depth): the q x q (x depth) processor grid of SUMMA-based tensor parallelism.

Position (i, j, l), i, j < q, l < depth, sits on GPU ``l·q² + i·q + j``: each depth layer is
q² consecutive GPUs (so on nodes of q² GPUs a layer stays inside a node and only the depth
groups cross nodes). Communication groups, numbered like :class:`DeviceMesh`'s dimensions so
the step simulator can ask either object for ``groups(dim)``:

* dimension 1, the grid's *columns*: i varies (j, l fixed), q groups of q per layer;
* dimension 2, the grid's *rows*: j varies (i, l fixed), q groups of q per layer;
* dimension 3, *depth*: l varies (i, j fixed), q² groups of depth GPUs.

With depth = 1 the dimension-1 and -2 groups are those of ``DeviceMesh(q, q)`` (row-major).
"""

from __future__ import annotations

from dataclasses import dataclass

from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh


@dataclass(frozen=True)
class Grid:
    """A q x q x depth grid of ``q² · depth`` GPUs (2D SUMMA at depth 1, 2.5D above)."""

    q: int
    depth: int = 1

    def __post_init__(self) -> None:
        if self.q < 1 or self.depth < 1:
            raise AtpsimError(f"grid sizes must be >= 1, got Grid(q={self.q}, depth={self.depth})")

    @property
    def size(self) -> int:
        return self.q * self.q * self.depth

    def __str__(self) -> str:
        return f"Grid({self.q}x{self.q}x{self.depth})"

    def _gpu(self, i: int, j: int, layer: int) -> int:
        return layer * self.q * self.q + i * self.q + j

    def groups(self, dim: int) -> list[list[int]]:
        """GPU ranks of every group on grid dimension *dim* (1 columns, 2 rows, 3 depth)."""
        q, layers = range(self.q), range(self.depth)
        if dim == 1:
            return [[self._gpu(i, j, lay) for i in q] for lay in layers for j in q]
        if dim == 2:
            return [[self._gpu(i, j, lay) for j in q] for lay in layers for i in q]
        if dim == 3:
            return [[self._gpu(i, j, lay) for lay in layers] for i in q for j in q]
        raise AtpsimError(f"grid dimension must be 1, 2 or 3, got {dim}")

    def dim_size(self, dim: int) -> int:
        return self.depth if dim == 3 else self.q

    def layer_mesh(self) -> DeviceMesh:
        """One depth layer as ``DeviceMesh(q, q)`` (row-major): the same dimension-1 and -2
        groups as the grid's first layer. Results tables describe a grid by it (d1 = d2 = q)."""
        return DeviceMesh(self.q, self.q)
