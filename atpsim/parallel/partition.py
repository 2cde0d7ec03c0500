"""How a job's transformer layers are split over its pipeline stages: ``partition``.

- ``even`` (the default): ``L / p`` layers on every stage, the layers a divisor of the stages
  (with virtual stages, of ``p·v``), as before uneven pipelines.
- ``[n1, ..., np]``: stage ``s`` holds ``n_s`` layers (each ``>= 0``, summing to ``L``), as
  Megatron-LM's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``
  let the first and last stages hold fewer (BLOOM-176B trained 70 layers on 12 stages:
  Scao et al. 2022, arXiv:2211.05100). Not with virtual stages (refused: each chunk would need
  its own count).
- ``auto``: the counts that minimise the largest stage cost, a stage's cost being its layers'
  time plus its share of the model's ends (the embedding on the first stage, the LM head with
  the loss on the last): :func:`balanced_layers`. The costs come from the job model
  (:mod:`atpsim.training.partition`), so ``auto`` is resolved to counts before a job runs.

Every count here is plain arithmetic on integers and seconds; nothing is simulated.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from atpsim.errors import SimulationError

EVEN, AUTO = "even", "auto"
#: The partitions a job may name (besides a list of counts).
PARTITIONS = (EVEN, AUTO)

Partition = str | tuple[int, ...]


def as_partition(value: object) -> Partition:
    """*value* as a partition: a name of :data:`PARTITIONS` as given, a list of counts as a
    tuple (hashable, so a JobConfig holding it stays frozen)."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value  # type: ignore[return-value]


def check_partition(partition: Partition, layers: int, pp: int, virtual_stages: int = 1) -> None:
    """A SimulationError keyed ``partition`` (or ``pp`` for an even split that does not
    divide) where *partition* cannot split *layers* over *pp* stages of *virtual_stages*
    chunks each: an unknown name, a list of the wrong length or sum, a count that is not a
    whole number >= 0, or anything but ``even`` with virtual stages."""
    if isinstance(partition, str):
        if partition not in PARTITIONS:
            raise SimulationError(f"expected partition even, auto or a list of {pp} layer counts, "
                                  f"got {partition!r}", key="partition")  # fmt: skip
        if partition == EVEN and layers % (pp * virtual_stages):
            raise SimulationError(f"{layers} layers do not split over {pp * virtual_stages} (virtual) "
                                  "pipeline stages (partition: auto or a list of counts splits them "
                                  "unevenly)", key="pp")  # fmt: skip
    else:
        _check_counts(partition, layers, pp)
    if partition != EVEN and virtual_stages > 1:
        raise SimulationError(f"partition {show_partition(partition)} with {virtual_stages} virtual "
                              "stages: an uneven split is for one model chunk per stage; expected "
                              "partition: even", key="partition")  # fmt: skip


def _check_counts(counts: Sequence[object], layers: int, pp: int) -> None:
    _check_whole(counts)
    if len(counts) != pp:
        raise SimulationError(f"partition {list(counts)} names {len(counts)} stages; expected one "
                              f"count per pipeline stage ({pp})", key="partition")  # fmt: skip
    check_partition_value(tuple(counts), layers)  # type: ignore[arg-type]


def _check_whole(counts: Sequence[object]) -> None:
    bad = [c for c in counts if isinstance(c, bool) or not isinstance(c, int) or c < 0]
    if bad:
        raise SimulationError(f"expected whole layer counts >= 0, got {bad[0]!r} in partition "
                              f"{list(counts)}", key="partition")  # fmt: skip


def check_partition_value(partition: Partition, layers: int) -> None:
    """A SimulationError keyed ``partition`` where *partition* is no partition of *layers*
    layers whatever the pipeline depth: an unknown name, or counts that are not whole numbers
    >= 0 summing to the layers (what a planner checks before it searches depths)."""
    if isinstance(partition, str):
        if partition not in PARTITIONS:
            raise SimulationError(f"expected partition even, auto or a list of layer counts, got "
                                  f"{partition!r}", key="partition")  # fmt: skip
        return
    _check_whole(partition)
    if sum(partition) != layers:
        raise SimulationError(f"partition {list(partition)} holds {sum(partition)} layers; expected "
                              f"the model's {layers}", key="partition")  # fmt: skip


def stage_layers(partition: Partition, layers: int, pp: int) -> tuple[int, ...]:
    """The layers each of *pp* stages holds under *partition* (``even``: ``L // p`` each;
    a list: as given). ``auto`` has no counts until its costs are known
    (:func:`atpsim.training.partition.resolve_partition`): a SimulationError."""
    if partition == EVEN:
        return (layers // pp,) * pp
    if partition == AUTO:
        raise SimulationError("partition auto has no layer counts until it is resolved against the "
                              "hardware (atpsim.training.partition.resolve_partition)", key="partition")  # fmt: skip
    return tuple(partition)  # type: ignore[arg-type]


def end_costs(pp: int, first_s: float, last_s: float) -> tuple[float, ...]:
    """Each stage's fixed cost besides its layers: *first_s* (the embedding) on stage 0 and
    *last_s* (the LM head and loss) on stage ``pp - 1``; both on one stage."""
    ends = [0.0] * pp
    ends[0] += first_s
    ends[-1] += last_s
    return tuple(ends)


def stage_costs(counts: Sequence[int], layer_s: float, ends_s: Sequence[float]) -> tuple[float, ...]:
    """Each stage's cost: ``n_s · layer_s + ends_s[s]`` (s)."""
    return tuple(n * layer_s + e for n, e in zip(counts, ends_s, strict=True))


def balanced_layers(layers: int, layer_s: float, ends_s: Sequence[float]) -> tuple[int, ...]:
    """The layer counts of ``len(ends_s)`` stages that minimise the largest stage cost
    (:func:`stage_costs`), each layer costing *layer_s* and stage ``s`` also *ends_s[s]*.

    A highest-averages allocation in the manner of the D'Hondt method the SageMaker model
    parallelism library's auto-partitioner uses to give devices to module segments
    (Karakus et al. 2021, arXiv:2111.05972, Section 4 and Appendix C.4, Algorithm 3), here
    giving layers (seats) to stages (parties): each layer in turn goes to the stage whose
    cost after taking it, ``e_s + (n_s + 1)·c``, is least. With identical layers this is
    exact: the counts take the ``L`` smallest values of the stages' increasing sequences
    ``e_s + k·c``, and any split's largest cost is at least the ``L``-th smallest of them (or
    a stage's bare end cost, the same for every split). Contiguity is free: the layers are
    alike, so stage ``s`` holds the next ``n_s`` of them. Ties go to the later stage, which
    under 1F1B holds fewer micro-batches in flight (``p - s``), so the first stages, the
    busiest in memory, get the fewer layers; with no end costs and ``p`` dividing ``L`` the
    counts are ``even``'s."""
    pp = len(ends_s)
    if layer_s <= 0:
        raise SimulationError(f"a layer's cost must be > 0 s to balance stages, got {layer_s}",
                              key="partition")  # fmt: skip
    counts = [0] * pp
    heap = [(ends_s[s] + layer_s, -s) for s in range(pp)]
    heapq.heapify(heap)
    for _ in range(layers):
        _, neg = heapq.heappop(heap)
        s = -neg
        counts[s] += 1
        heapq.heappush(heap, (ends_s[s] + (counts[s] + 1) * layer_s, neg))
    return tuple(counts)


def show_partition(partition: Partition) -> str:
    """*partition* as a scenario writes it: ``even``, ``auto`` or ``[5, 6, ...]``."""
    return partition if isinstance(partition, str) else f"[{', '.join(map(str, partition))}]"
