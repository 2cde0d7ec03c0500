"""Read one measurements CSV into typed samples, recognising its kind by its columns.

The torch benchmarks of ``validation/bench`` write these tables; each is recognised by its
columns, not its name:

* collectives: ``op, group_size, bytes`` and a time (optional ``dim``, ``n_groups`` = groups of
  that dimension running at once, default 1; ``op`` spelled ``all_reduce`` or ``allreduce``);
* GEMMs: ``m, n, k, dtype`` and a time (optional ``batch``);
* memory-bound ops: ``op, bytes_moved`` and a time (atpsim's byte count of a non-GEMM op,
  :mod:`atpsim.calibrate.fit.memory`; optional ``shape``, which tells apart ops of equal bytes);
* layers: ``d1, d2, chunks, hidden, heads, batch, seq, dtype`` and a time
  (``fwd_bwd_time_s``; optional ``ffn_mult``, default 4, and the computing thread's run-queue
  delay in the fastest repetition and as a median, ``fwd_bwd_run_delay_s_fastest`` /
  ``_median``: time a shared host's other programs took from it).

The time of a row is the chosen statistic of its repetitions (:mod:`.settings`):
the median (``time_s_median``, ``median_time_s``, ``time_s_p50``, else the plain ``time_s``,
else ``time_s_mean``), the minimum (``time_s_min``) or the mean (``time_s_mean``); rows that
repeat a configuration (one row per repetition) are reduced by the same statistic. Seconds
throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from atpsim.calibrate.measurements.samples import (
    CollectiveSample,
    GemmSample,
    LayerPoint,
    MemoryOpSample,
)
from atpsim.errors import AtpsimError

COLLECTIVE_COLUMNS = ("op", "group_size", "bytes")
MEMORY_OP_COLUMNS = ("op", "bytes_moved")
GEMM_COLUMNS = ("m", "n", "k", "dtype")
LAYER_COLUMNS = ("d1", "d2", "chunks", "hidden", "heads", "batch", "seq", "dtype")
_OPS = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all-reduce": "all_reduce",
        "all_gather": "all_gather", "allgather": "all_gather", "all-gather": "all_gather",
        "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
        "reduce-scatter": "reduce_scatter"}  # fmt: skip


def read_table(path: Path, statistic: str) -> tuple[str, list[Any]]:
    """The kind of the table at *path* ('collectives', 'gemms', 'layers' or 'memory_ops') and
    its samples, each configuration's time the *statistic* of its repetitions."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise AtpsimError(f"cannot read the CSV: {error}", source=str(path)) from None
    columns = set(frame.columns)
    readers: tuple[tuple[str, tuple[str, ...], Callable[..., list[Any]]], ...] = (
        ("layers", LAYER_COLUMNS, _layers),
        ("gemms", GEMM_COLUMNS, _gemms),
        ("collectives", COLLECTIVE_COLUMNS, _collectives),
        ("memory_ops", MEMORY_OP_COLUMNS, _memory_ops),
    )
    for kind, required, reader in readers:
        if set(required) <= columns:
            try:
                return kind, reader(frame, path.name, statistic)
            except AtpsimError as error:
                raise error.with_source(str(path)) from None
    raise AtpsimError(
        f"not a collectives ({', '.join(COLLECTIVE_COLUMNS)}), GEMM ({', '.join(GEMM_COLUMNS)}), "
        f"memory-op ({', '.join(MEMORY_OP_COLUMNS)}) or layer ({', '.join(LAYER_COLUMNS)}) "
        f"table; its columns are {sorted(columns)}",
        source=str(path),
    )


#: Column names that hold each statistic of a time column *base* (first found wins).
_STATISTIC_COLUMNS = {
    "median": ("{base}_median", "median_{base}", "{base}_p50", "{base}", "{base}_mean"),
    "min": ("{base}_min", "min_{base}"),
    "mean": ("{base}_mean", "mean_{base}"),
}


def time_column(frame: pd.DataFrame, base: str = "time_s", statistic: str = "median") -> str:
    """The column holding a row's time as *statistic*: for the median, ``base_median`` or the
    plain *base* (benchmarks write the median there), else the mean."""
    names = [name.format(base=base) for name in _STATISTIC_COLUMNS[statistic]]
    for name in names:
        if name in frame.columns:
            return name
    raise AtpsimError(f"no time column for the {statistic}: expected one of {names}", key=base)


def _reduced(frame: pd.DataFrame, keys: Sequence[str], time: str, statistic: str) -> pd.DataFrame:
    """One row per configuration *keys*, its time the *statistic* of the repeated rows."""
    times = pd.to_numeric(frame[time], errors="coerce")
    if times.isna().any() or (times <= 0).any():
        row = int((times.isna() | (times <= 0)).to_numpy().argmax())
        raise AtpsimError(f"expected a positive time in seconds, got {frame[time].iloc[row]!r}",
                          key=f"row {row + 2}.{time}")  # fmt: skip
    frame = frame.assign(**{time: times})
    grouped = frame.groupby(list(keys), sort=True, dropna=False)[time]
    return grouped.agg(statistic).reset_index()


def _int(row: Any, key: str, where: str) -> int:
    value = row[key]
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise AtpsimError(f"expected an integer, got {value!r}", key=f"{where}.{key}") from None
    if number != value or number < 1:
        raise AtpsimError(f"expected an integer >= 1, got {value!r}", key=f"{where}.{key}")
    return number


def _collectives(frame: pd.DataFrame, name: str, statistic: str) -> list[CollectiveSample]:
    time = time_column(frame, "time_s", statistic)
    frame = frame.assign(
        n_groups=frame["n_groups"] if "n_groups" in frame else 1,
        dim=frame["dim"] if "dim" in frame else 0,
    )
    table = _reduced(frame, ["op", "dim", "group_size", "n_groups", "bytes"], time, statistic)
    samples = []
    for i, row in table.iterrows():
        where = f"{name} row {i}"
        op = _OPS.get(str(row["op"]).lower())
        if op is None:
            raise AtpsimError(f"expected an op in {sorted(set(_OPS.values()))}, got {row['op']!r}",
                              key=f"{where}.op")  # fmt: skip
        label = f"{op} dim{row['dim']} p={row['group_size']}x{row['n_groups']} {row['bytes']}B"
        samples.append(
            CollectiveSample(
                op,
                _int(row, "group_size", where),
                _int(row, "n_groups", where),
                float(row["bytes"]),
                float(row[time]),
                label,
            )  # fmt: skip
        )
    return samples


def _gemms(frame: pd.DataFrame, name: str, statistic: str) -> list[GemmSample]:
    time = time_column(frame, "time_s", statistic)
    frame = frame.assign(batch=frame["batch"] if "batch" in frame else 1)
    table = _reduced(frame, ["m", "n", "k", "batch", "dtype"], time, statistic)
    samples = []
    for i, row in table.iterrows():
        where = f"{name} row {i}"
        m, n, k = (_int(row, key, where) for key in ("m", "n", "k"))
        batch = _int(row, "batch", where)
        label = (
            f"{batch}x{m}x{n}x{k} {row['dtype']}" if batch > 1 else f"{m}x{n}x{k} {row['dtype']}"
        )
        samples.append(GemmSample(m, n, k, str(row["dtype"]), float(row[time]), batch, label))
    return samples


def _memory_ops(frame: pd.DataFrame, name: str, statistic: str) -> list[MemoryOpSample]:
    time = time_column(frame, "time_s", statistic)
    frame = frame.assign(shape=frame["shape"] if "shape" in frame else "")
    table = _reduced(frame, ["op", "shape", "bytes_moved"], time, statistic)
    samples = []
    for i, row in table.iterrows():
        moved = float(row["bytes_moved"])
        if not moved > 0:
            raise AtpsimError(f"expected bytes > 0, got {row['bytes_moved']!r}",
                              key=f"{name} row {i}.bytes_moved")  # fmt: skip
        label = f"{row['op']} {row['shape'] or f'{moved:.0f}B'}"
        samples.append(MemoryOpSample(str(row["op"]), moved, float(row[time]), label))
    return samples


def _layers(frame: pd.DataFrame, name: str, statistic: str) -> list[LayerPoint]:
    time = time_column(frame, "fwd_bwd_time_s", statistic)
    frame = frame.assign(ffn_mult=frame["ffn_mult"] if "ffn_mult" in frame else 4)
    keys = [*LAYER_COLUMNS, "ffn_mult"]
    table = _reduced(frame, keys, time, statistic)
    delays = _layer_delays(frame, keys, time, statistic)
    points = []
    for i, row in table.iterrows():
        where = f"{name} row {i}"
        ints = {key: _int(row, key, where) for key in keys if key != "dtype"}
        label = (f"({ints['d1']},{ints['d2']}) c{ints['chunks']} h{ints['hidden']} "
                 f"b{ints['batch']} s{ints['seq']}")  # fmt: skip
        points.append(LayerPoint(**ints, dtype=str(row["dtype"]), time_s=float(row[time]),
                                 label=label, run_delay_s=delays.get(i)))  # fmt: skip
    return points


#: The run-delay column that goes with each statistic of the layer time.
_DELAY_COLUMNS = {"min": "fwd_bwd_run_delay_s_fastest", "median": "fwd_bwd_run_delay_s_median",
                  "mean": "fwd_bwd_run_delay_s_median"}  # fmt: skip


def _layer_delays(
    frame: pd.DataFrame, keys: list[str], time: str, statistic: str
) -> dict[int, float]:
    """Row index of the reduced layer table -> the run-queue delay that goes with its time:
    with the min, the delay of the row holding the fastest time; else the median of the
    rows' median delays. {} when the CSV has no delay column."""
    column = _DELAY_COLUMNS[statistic]
    if column not in frame.columns:
        return {}
    frame = frame.assign(**{column: pd.to_numeric(frame[column], errors="coerce"),
                            time: pd.to_numeric(frame[time], errors="coerce")})  # fmt: skip
    groups = frame.groupby(keys, sort=True, dropna=False)
    if statistic == "min":
        delays = frame.loc[groups[time].idxmin(), column].tolist()
    else:
        delays = groups[column].median().tolist()
    return {i: float(v) for i, v in enumerate(delays) if v == v}
