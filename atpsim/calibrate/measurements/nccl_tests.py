"""Read the text that nccl-tests' ``all_reduce_perf`` (and its siblings) print.

The format (nccl-tests ``src/common.cu``; every version since 2.10 prints these columns)::

    # nThread 1 nGpus 8 minBytes 1048576 maxBytes 8589934592 step: 2(factor) ...
    #  Rank  0 Group  0 Pid   4711 on  node-0 device  0 [0x07] NVIDIA A100-SXM4-80GB
    ...
    #                                   out-of-place                       in-place
    #       size   count  type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
    #        (B) (elements)                   (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
         1048576  262144 float    sum    -1  50.66  20.70  36.22      0  50.66  20.70  36.22      0

Times are microseconds; ``algbw = size / time`` and ``busbw = algbw · 2(p-1)/p`` for all-reduce
(nccl-tests' PERFORMANCE.md), both in GB/s = 10^9 bytes/s. Older logs lack the ``redop`` and
``root`` columns (or ``root`` alone): the data line's width tells which. ``#wrong`` may be
``N/A`` (validation off). The rank count comes from the ``Rank`` lines (one per GPU of the whole
job), else ``nGpus · nThread`` of the header, else the caller says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from atpsim.calibrate.measurements.samples import CollectiveSample
from atpsim.errors import AtpsimError, param, read_text

_RANK_LINE = re.compile(r"^#\s*Rank\s+\d+\s")
_HEADER = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
#: Fields before the out-of-place block: size, count, type, [redop], [root].
_LEADING_WIDTHS = (5, 4, 3)
_BLOCK_WIDTH = 4  # time, algbw, busbw, #wrong
PLACEMENTS = ("out-of-place", "in-place")


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of the sweep. Times in seconds, bandwidths in bytes/s (GB/s · 10^9)."""

    size_bytes: int
    count: int
    dtype: str
    out_of_place_time_s: float
    out_of_place_algbw_Bps: float
    out_of_place_busbw_Bps: float
    in_place_time_s: float
    in_place_algbw_Bps: float
    in_place_busbw_Bps: float

    def time_s(self, placement: str) -> float:
        """The time of the ``out-of-place`` or ``in-place`` run."""
        return self.in_place_time_s if placement == "in-place" else self.out_of_place_time_s

    def busbw_Bps(self, placement: str) -> float:
        return self.in_place_busbw_Bps if placement == "in-place" else self.out_of_place_busbw_Bps


@dataclass(frozen=True)
class NcclTestsLog:
    """A parsed log: its rows by increasing size and the job's rank count (None if unknown)."""

    rows: tuple[NcclTestsRow, ...]
    n_ranks: int | None
    source: str = "<text>"
    #: What looks cut short: sizes the header asks for but no row has, a last row cut
    #: mid-line (dropped), no closing summary. A fit on such a log may be far off.
    warnings: tuple[str, ...] = ()


def read_nccl_tests(path: str | Path) -> NcclTestsLog:
    """Parse the nccl-tests log file at *path*."""
    text = read_text(path, "the nccl-tests log")
    return parse_nccl_tests(text, source=str(path))


def parse_nccl_tests(text: str, *, source: str = "<text>") -> NcclTestsLog:
    """Parse nccl-tests output *text*; errors name *source* and the offending line."""
    rows: list[NcclTestsRow] = []
    rank_lines = 0
    header_ranks: int | None = None
    warnings: list[str] = []
    lines = text.splitlines()
    cut = _cut_last_line(text, lines)
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            rank_lines += bool(_RANK_LINE.match(stripped))
            match = _HEADER.search(stripped)
            if match:
                header_ranks = int(match.group(1)) * int(match.group(2))
            continue
        if number == cut:
            warnings.append(f"line {number} is cut mid-line (no line end): left out of the fit")
            continue
        if stripped[0].isdigit():
            rows.append(_data_row(stripped.split(), f"line {number}", source))
    if not rows:
        raise AtpsimError(
            "no data rows found; expected nccl-tests output (size count type ... time algbw busbw)",
            source=source,
        )
    rows.sort(key=lambda row: row.size_bytes)
    warnings += _missing_sizes(text, [row.size_bytes for row in rows])
    if not _CLOSING.search(text):
        warnings.append("no closing '# Out of bounds values' or '# Avg bus bandwidth' line: "
                        "the log may be cut short")  # fmt: skip
    return NcclTestsLog(tuple(rows), rank_lines or header_ranks, source, tuple(warnings))


_SWEEP = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)")
_CLOSING = re.compile(r"^#\s*(Out of bounds values|Avg bus bandwidth)", re.MULTILINE)


def _cut_last_line(text: str, lines: list[str]) -> int | None:
    """The number of the last line when it is a data row with no line end (a cut log)."""
    if not lines or text.endswith(("\n", "\r")):
        return None
    last = lines[-1].strip()
    return len(lines) if last[:1].isdigit() else None


def _missing_sizes(text: str, sizes: list[int]) -> list[str]:
    """A warning when the header's sweep (minBytes, maxBytes, step) names sizes no row has."""
    match = _SWEEP.search(text)
    if match is None:
        return []
    low, high, step = (int(match.group(i)) for i in (1, 2, 3))
    factor = match.group(4) == "factor"
    if low < 1 or step < (2 if factor else 1) or high < low:
        return []
    expected: list[int] = []
    size = low
    while size <= high and len(expected) < 10_000:
        expected.append(size)
        size = size * step if factor else size + step
    missing = sorted(set(expected) - set(sizes))
    if not missing:
        return []
    shown = ", ".join(str(s) for s in missing[:4]) + (", ..." if len(missing) > 4 else "")
    return [
        f"{len(missing)} of the {len(expected)} sizes the header asks for ({low} to {high} B) "
        f"have no row ({shown}): the log may be cut short or filtered"
    ]


def _data_row(fields: list[str], where: str, source: str) -> NcclTestsRow:
    """One data line: 3 to 5 leading fields, then the out-of-place and in-place blocks."""
    leading = len(fields) - 2 * _BLOCK_WIDTH
    if leading not in _LEADING_WIDTHS:
        raise AtpsimError(
            f"expected {min(_LEADING_WIDTHS) + 8} to {max(_LEADING_WIDTHS) + 8} columns "
            f"(size count type [redop] [root] then time algbw busbw #wrong twice), "
            f"got {len(fields)}",
            source=source,
            key=where,
        )
    oop = fields[leading : leading + _BLOCK_WIDTH]
    inp = fields[leading + _BLOCK_WIDTH :]
    try:
        return NcclTestsRow(
            size_bytes=int(fields[0]),
            count=int(fields[1]),
            dtype=fields[2],
            out_of_place_time_s=_positive(oop[0], where, source) * 1e-6,
            out_of_place_algbw_Bps=float(oop[1]) * 1e9,
            out_of_place_busbw_Bps=float(oop[2]) * 1e9,
            in_place_time_s=_positive(inp[0], where, source) * 1e-6,
            in_place_algbw_Bps=float(inp[1]) * 1e9,
            in_place_busbw_Bps=float(inp[2]) * 1e9,
        )
    except ValueError as error:
        raise AtpsimError(f"expected numbers: {error}", source=source, key=where) from None


def _positive(text: str, where: str, source: str) -> float:
    value = float(text)
    if not value > 0:
        raise AtpsimError(f"expected a positive time in us, got {text!r}", source=source, key=where)
    return value


def format_nccl_tests(
    rows: list[tuple[int, float, float]], *, n_ranks: int, op_factor: float, device: str
) -> str:
    """nccl-tests-style text for *rows* ``(size_bytes, out_of_place_time_s, in_place_time_s)``
    of float32 sums on *n_ranks* ranks; *op_factor* is busbw / algbw (2(p-1)/p for all-reduce).
    Used to build test fixtures from published busbw rows and to export simulated sweeps."""
    lines = [
        f"# nThread 1 nGpus {n_ranks} minBytes {rows[0][0]} maxBytes {rows[-1][0]} "
        "step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid  1000 on     node-0 device {r:2d} [0x00] {device}"
            for r in range(n_ranks)
        ),
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    for size, oop_s, inp_s in rows:
        blocks = []
        for time_s in (oop_s, inp_s):
            algbw = size / time_s / 1e9
            blocks.append(f"{time_s * 1e6:8.2f} {algbw:7.2f} {algbw * op_factor:7.2f} {0:6d}")
        lines.append(
            f"{size:12d}  {size // 4:12d}     float     sum      -1 {blocks[0]} {blocks[1]}"
        )
    lines += ["# Out of bounds values : 0 OK", "#"]
    return "\n".join(lines) + "\n"


def nccl_samples(
    log: NcclTestsLog,
    *,
    op: str = "all_reduce",
    placement: str = "out-of-place",
    n_ranks: int | None = None,
) -> list[CollectiveSample]:
    """The log's rows as collective samples of one group of all ranks (*n_ranks* overrides the
    log's count; *placement* picks the ``out-of-place`` or ``in-place`` columns)."""
    if placement not in PLACEMENTS:
        raise AtpsimError(f"expected a placement in {list(PLACEMENTS)}, got {placement!r}")
    if n_ranks is not None and (isinstance(n_ranks, bool) or n_ranks < 2):
        raise AtpsimError(f"expected a rank count >= 2, got {n_ranks!r}", param="ranks")
    if n_ranks is not None and log.n_ranks is not None and n_ranks != log.n_ranks:
        raise AtpsimError(
            f"the log says {log.n_ranks} ranks ran; {param('ranks', n_ranks)} disagrees (leave it out)",
            source=log.source,
            param="ranks",
        )
    ranks = n_ranks if n_ranks is not None else log.n_ranks
    if not ranks or ranks < 2:
        raise AtpsimError(
            "the log does not say how many ranks ran (no 'Rank' lines, no 'nGpus'); "
            "give the rank count",
            source=log.source,
        )
    return [
        CollectiveSample(
            op,
            ranks,
            1,
            float(row.size_bytes),
            row.time_s(placement),
            f"{Path(log.source).name}:{row.size_bytes}B",
        )  # fmt: skip
        for row in log.rows
    ]
