"""Unit parsing and formatting at the YAML/CLI boundary; SI inside the package.

Conventions (house style): bandwidths in bytes/s, times in seconds, sizes in bytes.
"GB" is 10^9 bytes and "GiB" is 2^30; "Gb" (lower-case b) is 10^9 bits. Sizes written the
nccl-tests way ("8", "1K", "1M", "1G", no trailing B) are binary, as nccl-tests reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from atpsim.errors import AtpsimError, check_number

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_NCCL_SIZE = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if not match:
        raise AtpsimError(f"expected {what}, got {text!r}")
    return float(match.group(1)), match.group(2)


def _prefix_scale(prefix: str) -> float | None:
    if prefix in _BINARY:
        return _BINARY[prefix]
    return _DECIMAL.get(prefix)


def parse_bandwidth(value: float | int | str) -> float:
    """Bytes/s from a number (already bytes/s) or a string like '25 GB/s', '200 Gb/s', '1.5 GiB/s'."""
    if isinstance(value, (int, float)):
        return float(value)
    number, unit = _split(value, "a bandwidth such as '25 GB/s' or '200 Gb/s'")
    match = re.fullmatch(r"([kKMGTP]i?)?([Bb])(?:/s|ps)", unit)
    scale = _prefix_scale(match.group(1) or "") if match else None
    if match is None or scale is None:
        raise AtpsimError(f"expected a bandwidth such as '25 GB/s' or '200 Gb/s', got {value!r}")
    bits = match.group(2) == "b"
    return number * scale / (8.0 if bits else 1.0)


def parse_time(value: float | int | str) -> float:
    """Seconds from a number (already seconds) or a string like '0.6 us', '5 ms', '1e-6 s'."""
    if isinstance(value, (int, float)):
        return float(value)
    number, unit = _split(value, "a time such as '0.6 us' or '5 ms'")
    if unit not in _TIME:
        raise AtpsimError(f"expected a time unit in {sorted(_TIME)}, got {value!r}")
    return number * _TIME[unit]


def parse_bytes(value: float | int | str) -> float:
    """Bytes from a number, an SI/IEC size ('1 GB', '1 GiB') or an nccl-tests size ('1G' = 2^30)."""
    if isinstance(value, (int, float)):
        return float(value)
    number, unit = _split(value, "a size such as '1G', '64MiB' or '1 GB'")
    if unit in _NCCL_SIZE:
        return number * _NCCL_SIZE[unit]
    match = re.fullmatch(r"([kKMGTP]i?)?B", unit)
    scale = _prefix_scale(match.group(1) or "") if match else None
    if match is None or scale is None:
        raise AtpsimError(f"expected a size such as '1G', '64MiB' or '1 GB', got {value!r}")
    return number * scale


#: Physically sensible ranges: a link between 1 MB/s (slow Ethernet) and 100 TB/s (beyond any
#: NVLink generation), a latency between 0 and 1 s. Values outside need ``force: true``.
BANDWIDTH_RANGE_Bps = (1e6, 1e14)
LATENCY_RANGE_s = (0.0, 1.0)

BANDWIDTH_FORMS = "'25 GB/s', '200 Gb/s', '1.5 GiB/s' or '100 Gbps'"
TIME_FORMS = "'0.6 us', '5 ms', '100 ns' or '1e-6 s'"


def parse_bandwidth_text(value: object, *, force: bool = False) -> float:
    """Bytes/s from a bandwidth *written by a user* (a YAML value or an option): it must carry
    its unit, be positive and finite and, unless *force*, lie in :data:`BANDWIDTH_RANGE_Bps`."""
    expected = f"expected a positive bandwidth such as {BANDWIDTH_FORMS}"
    bandwidth = _parse_text(parse_bandwidth, value, expected)
    if not bandwidth > 0:
        raise AtpsimError(f"{expected}, got {value!r}")
    _check_range(bandwidth, BANDWIDTH_RANGE_Bps, value, "bandwidth", "1 MB/s to 100 TB/s", force)
    return bandwidth


def parse_time_text(value: object, *, force: bool = False) -> float:
    """Seconds from a latency *written by a user*: it must carry its unit, be >= 0 and, unless
    *force*, lie in :data:`LATENCY_RANGE_s`."""
    expected = f"expected a non-negative time (>= 0) such as {TIME_FORMS}"
    seconds = _parse_text(parse_time, value, expected)
    if seconds < 0:
        raise AtpsimError(f"{expected}, got {value!r}")
    _check_range(seconds, LATENCY_RANGE_s, value, "latency", "0 s to 1 s", force)
    return seconds


def _parse_text(parse: Callable[[str], float], value: object, expected: str) -> float:
    """*parse* of *value*, which must be text with a unit (a bare number such as 25, '25' or
    .inf is an error) and may start with '-' (a negative value, for the caller to refuse)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AtpsimError(f"{expected}, got {value!r}")
    if not isinstance(value, str) or _is_number(value):
        raise AtpsimError(f"a bare number has no unit: {expected}, got {value!r}")
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    try:
        return sign * parse(text.lstrip("-"))
    except AtpsimError:
        raise AtpsimError(f"{expected}, got {value!r}") from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_range(
    si: float, bounds: tuple[float, float], value: object, what: str, text: str, force: bool
) -> None:
    low, high = bounds
    if si != si or si in (float("inf"), float("-inf")):
        raise AtpsimError(f"expected a finite {what}, got {value!r}")
    if not force and not low <= si <= high:
        raise AtpsimError(
            f"{value!r} is outside the physical range of a {what} ({text}); "
            "to simulate it anyway add 'force: true' (in a spec string ',force=true')"
        )


#: The largest buffer a collective may be asked to move per rank, bytes: 1 PiB (2^50), a
#: thousand times any GPU's memory and well within a float's exact integers (2^53).
MAX_BUFFER_BYTES = 2**50


def buffer_bytes(value: float | int | str) -> int:
    """Bytes from a size (:func:`parse_bytes`) that must be finite, >= 0 and at most
    :data:`MAX_BUFFER_BYTES` ('1e400' parses to inf, which ``int()`` cannot take)."""
    size = parse_bytes(value)
    check_number(size, None, low=0, high=MAX_BUFFER_BYTES, what="a size", shown=value,
                 bounds=" from 0 to 1 PiB (2^50 bytes) per rank")  # fmt: skip
    return int(size)


def parse_size_range(text: str) -> list[int]:
    """nccl-tests' ``-b MIN -e MAX -f 2`` as one string 'MIN:MAX' (doubling) or a single size,
    each finite and at most :data:`MAX_BUFFER_BYTES` (:func:`buffer_bytes`)."""
    if ":" not in text:
        return [buffer_bytes(text)]
    low_text, high_text = text.split(":", 1)
    low, high = buffer_bytes(low_text), buffer_bytes(high_text)
    if low <= 0 or high < low:
        raise AtpsimError(f"expected MIN:MAX with 0 < MIN <= MAX, got {text!r}")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= 2
    return sizes


def format_bandwidth(bytes_per_s: float) -> str:
    """'123.4 GB/s' (decimal GB, as vendors and nccl-tests print)."""
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def format_time(seconds: float) -> str:
    """A time with the unit that keeps 1-4 digits before the point."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def format_bytes(n_bytes: float) -> str:
    """A size in binary units, the way nccl-tests' size column reads (bytes as an integer)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.4g} {unit}"
    return f"{int(n_bytes)} B"
