"""Read a PyTorch profiler (Kineto) Chrome trace into the GEMMs, memory-bound ops and
collectives of each profiled step.

The file is the JSON ``torch.profiler.profile.export_chrome_trace`` writes (``.json`` or
``.json.gz``): ``traceEvents``, complete events (``ph: X``) with ``ts`` and ``dur`` in
microseconds. What is read (names: :mod:`atpsim.calibrate.trace.names`):

* **steps**: each ``ProfilerStep#i`` range (``prof.step()`` or the harness's
  ``record_function``); without one, the whole trace is one step. A step's **backward** starts
  at its first ``autograd::engine::evaluate_function`` range; an op launched before it is
  forward, after it backward.
* **work on a CPU trace** (no ``kernel`` events): per thread, CPU operators are nested by
  time; a GEMM operator is one GEMM (what runs under it is its own), a collective's CPU side
  and what runs under it are not compute, and the outermost ATen operator of any other work
  is one memory-bound op (``aten::dropout`` with its ``bernoulli_`` and ``mul``; an
  operator with a GEMM under it, such as ``aten::matmul``, is not one, nor a view or an
  allocation that does no work). Collectives are gloo's ``gloo:<collective>`` work ranges.
* **work on a GPU trace**: every ``kernel`` event, a GEMM, an NCCL collective or else
  memory-bound; its shapes and launch time are those of the CPU operator with the same
  ``External id`` (the operator that launched it).

Shapes come from ``record_shapes=True`` (``Input Dims``, ``Input type``): a GEMM's
``(batch, m, n, k)`` from its last two matrix operands, a memory op's elements from its
largest operand, a collective's payload bytes from its first tensor (each rank's input: the
all-reduced buffer, an all-gather's shard).

A trace that is not JSON, has no ``traceEvents``, or has none of these ops is refused with
one line (:class:`~atpsim.errors.AtpsimError`).
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from atpsim.calibrate.trace import names
from atpsim.errors import AtpsimError, describe_os_error

Kind = Literal["gemm", "memory", "comm"]
#: Bytes per element of the ``Input type`` strings the profiler writes.
DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
    "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
}  # fmt: skip


@dataclass(frozen=True)
class TraceOp:
    """One unit of work in a step: *kind*, the event's *name*, its *start_s* (from the step's
    start) and *dur_s*, *phase*, and its size: a GEMM's ``(batch, m, n, k)`` in *gemm*, a
    memory op's *elements*, a collective's name in *collective* and payload in *nbytes*."""

    kind: Kind
    name: str
    step: int
    start_s: float
    dur_s: float
    phase: Literal["fwd", "bwd"]
    gemm: tuple[int, int, int, int] | None = None
    elements: int = 0
    collective: str | None = None
    nbytes: float = 0.0


@dataclass(frozen=True)
class KinetoTrace:
    """The ops of every profiled step, each step's duration (s), whether the work is GPU
    kernels, and the trace's top-level metadata (e.g. ``distributedInfo``, ``atpsim_layer``)."""

    path: Path
    ops: tuple[TraceOp, ...]
    step_s: tuple[float, ...]
    gpu: bool
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Event:
    """A complete event with what its nesting says about it."""

    raw: dict[str, Any]
    name: str
    ts: float  # us
    dur: float  # us
    parent: _Event | None = None
    busy_child: bool = False
    holds_gemm: bool = False
    unit: bool = False

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def under(self, test: Any) -> bool:
        """True when an ancestor (not the event itself) satisfies *test*."""
        node = self.parent
        while node is not None:
            if test(node):
                return True
            node = node.parent
        return False


def read_trace(path: str | Path) -> KinetoTrace:
    """The steps and ops of the Kineto trace in *path* (module docstring)."""
    data = _load(Path(path))
    events = [_Event(_clean(e), str(e["name"]), float(e["ts"]), float(e["dur"]))
              for e in data["traceEvents"] if _complete(e)]  # fmt: skip
    gpu = any(e.raw.get("cat") == "kernel" for e in events)
    host = [e for e in events if e.raw.get("cat") in ("cpu_op", "user_annotation")]
    _nest(host)
    steps = _steps(host, events)
    try:
        ops = _gpu_ops(events, host, steps) if gpu else _cpu_ops(host, steps)
    except AtpsimError as error:
        raise error.with_source(str(path)) from None
    if not ops:
        raise AtpsimError(
            "no GEMM, memory-bound or collective ops in the trace's steps (expected a PyTorch "
            "profiler trace with aten:: operators or CUDA kernels)", source=str(path))  # fmt: skip
    metadata = {k: v for k, v in data.items() if k != "traceEvents"}
    return KinetoTrace(Path(path), tuple(ops), tuple((end - start) * 1e-6 for start, end, _ in steps),
                       gpu, metadata)  # fmt: skip


#: The largest trace text read (decompressed): parsed JSON takes about 6 times its text
#: (json.loads of a 13 MB Kineto trace peaked at 77 MB, tracemalloc), so 1 GiB is some 6-10 GB.
MAX_TRACE_BYTES = 1 << 30


def _load(path: Path) -> dict[str, Any]:
    try:
        text = _trace_text(path)
        data = json.loads(text)
    except OSError as error:
        raise AtpsimError(describe_os_error(error, path)) from None
    except (ValueError, EOFError, zlib.error) as error:  # JSONDecodeError, UnicodeError, bad gzip
        raise AtpsimError(f"not a JSON trace: {error}", source=str(path)) from None
    except RecursionError:
        raise AtpsimError("not a JSON trace: nested too deeply", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise AtpsimError("JSON without a 'traceEvents' list: not a Chrome/Kineto trace",
                          source=str(path))  # fmt: skip
    _check_times(data["traceEvents"], str(path))
    return data


def _check_times(events: list[Any], source: str) -> None:
    """Refuse a complete event whose ``ts`` or ``dur`` is a number but not a finite one
    (JSON's 1e400 reads as inf; its ratios came out as "+nan%"), naming the event."""
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        for key in ("ts", "dur"):
            value = event.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                raise AtpsimError(f"expected a finite time in microseconds, got {value!r}",
                                  source=source, key=f"traceEvents[{index}].{key}")  # fmt: skip


def _trace_text(path: Path) -> bytes | bytearray:
    """The file's bytes, gunzipped where it is gzip; past MAX_TRACE_BYTES an AtpsimError
    (before it is all read or decompressed: a small .gz can hold gigabytes)."""
    too_big = AtpsimError(f"a trace of more than {MAX_TRACE_BYTES >> 20:,} MiB of JSON: profile "
                          "fewer steps (e.g. torch.profiler.schedule(active=2))", source=str(path))  # fmt: skip
    with path.open("rb") as handle:
        raw = handle.read(MAX_TRACE_BYTES + 1)
    if raw[:2] != b"\x1f\x8b":
        if len(raw) > MAX_TRACE_BYTES:
            raise too_big
        return raw
    unzip, text, pending = zlib.decompressobj(16 + zlib.MAX_WBITS), bytearray(), raw
    while pending and len(text) <= MAX_TRACE_BYTES:  # in pieces: a bomb stops at the limit
        text += unzip.decompress(pending, 1 << 24)
        pending = unzip.unconsumed_tail
    if len(text) > MAX_TRACE_BYTES:
        raise too_big
    if not unzip.eof:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
    return text


def _complete(event: Any) -> bool:
    """A complete (``ph: X``) event with a name and finite, non-negative times."""
    if not isinstance(event, dict) or event.get("ph") != "X" or "name" not in event:
        return False
    try:
        return math.isfinite(float(event["ts"])) and float(event["dur"]) >= 0
    except (KeyError, TypeError, ValueError):
        return False


def _clean(event: dict[str, Any]) -> dict[str, Any]:
    """*event* (in place) with ``args`` a mapping (else empty) and its pid, tid and External
    id hashable (a malformed trace's lists become their text), so grouping cannot fail."""
    args = event.get("args")
    event["args"] = args if isinstance(args, dict) else {}
    for where, key in ((event, "pid"), (event, "tid"), (event["args"], "External id")):
        if key in where and not isinstance(where[key], (int, float, str, type(None))):
            where[key] = repr(where[key])
    return event


def _nest(host: list[_Event]) -> None:
    """Set each host event's parent (the innermost enclosing event on its thread) and mark
    parents with a child that does work (anything but bookkeeping)."""
    by_thread: dict[tuple[Any, Any], list[_Event]] = {}
    for event in host:
        by_thread.setdefault((event.raw.get("pid"), event.raw.get("tid")), []).append(event)
    for thread in by_thread.values():
        stack: list[_Event] = []
        for event in sorted(thread, key=lambda e: (e.ts, -e.dur)):
            while stack and stack[-1].end <= event.ts:
                stack.pop()
            if stack:
                event.parent = stack[-1]
                if event.name not in names.BOOKKEEPING_OPS:
                    stack[-1].busy_child = True
            stack.append(event)


def _steps(host: list[_Event], events: list[_Event]) -> list[tuple[float, float, float]]:
    """(start, end, backward start) in us of each step, in order."""
    marked = sorted((e for e in host if e.name.startswith(names.STEP_PREFIX)), key=lambda e: e.ts)
    spans = [(e.ts, e.end) for e in marked] or [
        (min(e.ts for e in events), max(e.end for e in events))
    ] if events else []
    backward = [e.ts for e in host if e.name.startswith(names.BACKWARD_PREFIX)]
    result = []
    for start, end in spans:
        inside = [t for t in backward if start <= t <= end]
        result.append((start, end, min(inside, default=end)))
    return result


def _place(ts: float, steps: list[tuple[float, float, float]]) -> tuple[int, str] | None:
    """(step index, phase) of work launched at *ts* us; None outside every step."""
    for index, (start, end, backward) in enumerate(steps):
        if start <= ts <= end:
            return index, "bwd" if ts >= backward else "fwd"
    return None


def _cpu_ops(host: list[_Event], steps: list[tuple[float, float, float]]) -> list[TraceOp]:
    _mark_gemm_ancestors(host)
    ops = []
    for event in sorted(host, key=lambda e: (e.ts, -e.dur)):  # parents before children
        kind, collective = _cpu_kind(event)
        placed = _place(event.ts, steps)
        if kind is None or placed is None:
            continue
        event.unit = True
        ops.append(_op(kind, event, event, collective, steps, placed))
    return sorted(ops, key=lambda op: (op.step, op.start_s))


def _mark_gemm_ancestors(host: list[_Event]) -> None:
    """Flag every operator that has a GEMM or a collective call under it (``aten::matmul``,
    ``aten::linear``): it is no memory-bound op, its other children may be."""
    for event in host:
        if event.name in names.GEMM_OPS or names.is_comm_call(event.name):
            node = event.parent
            while node is not None and not node.holds_gemm:
                node.holds_gemm = True
                node = node.parent


def _cpu_kind(event: _Event) -> tuple[Kind | None, str | None]:
    """What a host event is on a CPU trace: a collective's work, a GEMM, the outermost
    operator of a memory-bound op (its children's time is part of it) or nothing
    (bookkeeping, wrappers, work inside a GEMM, a collective or another op)."""
    collective = names.gloo_collective(event.name)
    if collective is not None:
        return "comm", collective
    if event.raw.get("cat") != "cpu_op" or names.is_comm_call(event.name):
        return None, None
    if event.under(lambda node: node.unit or node.name in names.GEMM_OPS
                   or names.is_comm_call(node.name)):  # fmt: skip
        return None, None
    if event.name in names.GEMM_OPS:
        return "gemm", None
    if event.holds_gemm or (event.name in names.BOOKKEEPING_OPS and not event.busy_child):
        return None, None
    if "::" not in event.name or event.name.startswith(names.AUTOGRAD_PREFIXES):
        return None, None  # autograd nodes and Python ranges: wrappers, not kernels
    return "memory", None


def _gpu_ops(events: list[_Event], host: list[_Event],
             steps: list[tuple[float, float, float]]) -> list[TraceOp]:  # fmt: skip
    """Every kernel, with the shapes and launch time of the CPU operator that launched it."""
    launcher = {e.raw["args"].get("External id"): e for e in host if e.raw.get("cat") == "cpu_op"}
    ops = []
    for kernel in (e for e in events if e.raw.get("cat") == "kernel"):
        source = launcher.get(kernel.raw["args"].get("External id"), kernel)
        collective = names.nccl_collective(kernel.name)
        kind: Kind = "comm" if collective else "gemm" if names.is_gemm_kernel(kernel.name) else "memory"
        placed = _place(source.ts, steps)
        if placed is not None:
            ops.append(_op(kind, kernel, source, collective, steps, placed))
    return sorted(ops, key=lambda op: (op.step, op.start_s))


def _op(kind: Kind, work: _Event, source: _Event, collective: str | None,
        steps: list[tuple[float, float, float]], placed: tuple[int, str]) -> TraceOp:  # fmt: skip
    """A :class:`TraceOp` timed by *work* (the operator, range or kernel) with the shapes of
    *source* (the operator that launched it; *work* itself on a CPU)."""
    step, phase = placed
    args = source.raw["args"]
    dims = _tensors(args.get("Input Dims"))
    return TraceOp(
        kind=kind, name=work.name, step=step, start_s=(work.ts - steps[step][0]) * 1e-6,
        dur_s=work.dur * 1e-6, phase=phase,  # type: ignore[arg-type]
        gemm=_gemm_shape(dims) if kind == "gemm" else None,
        elements=max((math.prod(d) for d in dims), default=0),
        collective=collective, nbytes=_payload_bytes(work.raw["args"], dims, args),
    )  # fmt: skip


def _tensors(dims: Any) -> list[list[int]]:
    """The tensor shapes among ``Input Dims`` (a TensorList's first tensor stands for it)."""
    shapes = []
    for entry in dims if isinstance(dims, list) else []:
        if isinstance(entry, list) and entry and isinstance(entry[0], list):
            entry = entry[0]
        if isinstance(entry, list) and entry and all(isinstance(x, int) for x in entry):
            if any(isinstance(x, bool) or not 0 <= x <= MAX_DIM for x in entry):
                raise AtpsimError(f"an event's Input Dims hold {str(entry)[:60]}: expected "
                                  "tensor sizes from 0 to 2^48")  # fmt: skip
            shapes.append(entry)
    return shapes


#: The largest tensor dimension read from a trace (2^48 elements: far past any memory).
MAX_DIM = 1 << 48


def _gemm_shape(dims: list[list[int]]) -> tuple[int, int, int, int] | None:
    """``(batch, m, n, k)`` of ``[batch,] m x k`` times ``[batch,] k x n``: the last two
    operands of two or more dimensions (a bias or a mask comes first)."""
    matrices = [d for d in dims if len(d) >= 2]
    if len(matrices) < 2:
        return None
    a, b = matrices[-2], matrices[-1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return batch, a[-2], b[-1], a[-1]


def _payload_bytes(work_args: dict[str, Any], dims: list[list[int]], args: dict[str, Any]) -> float:
    """A collective's bytes per rank: NCCL kernels' ``In msg nelems`` where the profiler
    records it, else the first tensor operand's elements times its element size."""
    types = args.get("Input type") or work_args.get("Input type") or []
    size = DTYPE_BYTES.get(types[0] if types else "", 4) if isinstance(types, list) else 4
    if "In msg nelems" in work_args:
        count = work_args["In msg nelems"]
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_DIM:
            raise AtpsimError(f"a collective's 'In msg nelems' is {str(count)[:60]!r}: expected an "
                              "element count from 0 to 2^48")  # fmt: skip
        return float(count) * DTYPE_BYTES.get(str(work_args.get("dtype")), size)
    return float(math.prod(dims[0]) * size) if dims else 0.0
