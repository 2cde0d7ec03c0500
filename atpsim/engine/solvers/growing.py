"""Arrays that grow at their end in amortized constant time per element.

A live episode of the joint network (:mod:`atpsim.engine.joint.live`) adds a call's flows to
its event loop at every call that joins, hundreds of times over; concatenating every array of
the loop at each join copied all the nodes so far each time (quadratic in the calls: 70 of 120
seconds of the 960-GPU SageMaker job on the joint network). A :class:`Column` keeps spare
room and doubles it when full, so an append copies only what it adds (and, at each doubling,
what is there); its :attr:`~Column.view` is the filled part, an ordinary array that writes go
through to.
"""

from __future__ import annotations

import numpy as np

#: Room a column starts with (elements) when it first has to grow.
MIN_ROOM = 16


class Column:
    """A 1-D array of *dtype* that grows at its end; :attr:`view` is its filled part (a view
    of the buffer, valid until the next :meth:`extend`)."""

    def __init__(self, values: np.ndarray, dtype: type | np.dtype | None = None):
        self.buffer = np.array(values, dtype=dtype if dtype is not None else np.asarray(values).dtype)
        self.size = len(self.buffer)

    def __len__(self) -> int:
        return self.size

    @property
    def view(self) -> np.ndarray:
        return self.buffer[:self.size]

    def extend(self, values: np.ndarray) -> np.ndarray:
        """Append *values* (cast to the column's type); the new :attr:`view`."""
        need = self.size + len(values)
        if need > len(self.buffer):
            grown = np.empty(max(need, 2 * len(self.buffer), MIN_ROOM), dtype=self.buffer.dtype)
            grown[:self.size] = self.buffer[:self.size]
            self.buffer = grown
        self.buffer[self.size:need] = values
        self.size = need
        return self.buffer[:need]
