"""A measurements folder's own settings, ``tolerance.yaml``, written beside the measurements::

    # why this value: the machine's noise, what the model leaves out
    median_abs_error: 0.25
    # optional: which statistic of the repetitions stands for a configuration's time
    statistic: min

*median_abs_error* (a fraction: 0.25 = 25%) is what ``atpsim validate`` holds the median
|error| of the check points to. *statistic* is ``median`` (the default: a dedicated machine),
``min`` (a shared machine, where the fastest repetition is the least disturbed one) or
``mean``; the fit and the comparison both read every measurement with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from atpsim.errors import AtpsimError, did_you_mean, read_text

TOLERANCE_FILE = "tolerance.yaml"
TOLERANCE_KEY = "median_abs_error"
STATISTICS = ("median", "min", "mean")


@dataclass(frozen=True)
class Settings:
    """The tolerance (None when the folder has no ``tolerance.yaml``) and the statistic."""

    tolerance: float | None
    statistic: str = "median"


def read_settings(folder: str | Path, *, require_tolerance: bool = True) -> Settings:
    """The settings of *folder*; without a ``tolerance.yaml`` an error, or (for a fit alone,
    *require_tolerance* False) no tolerance and the median."""
    path = Path(folder) / TOLERANCE_FILE
    if not path.is_file():
        if not require_tolerance:
            return Settings(None)
        raise AtpsimError(
            f"no {TOLERANCE_FILE}: write one beside the measurements, e.g. "
            f"'{TOLERANCE_KEY}: 0.25' with a comment saying why that value",
            source=str(folder),
        )
    try:
        data = yaml.safe_load(read_text(path, "the tolerance file"))
    except yaml.YAMLError as error:
        raise AtpsimError(f"invalid YAML: {error}", source=str(path)) from None
    if not isinstance(data, dict) or TOLERANCE_KEY not in data:
        raise AtpsimError(f"expected a mapping with key {TOLERANCE_KEY}, got {data!r}",
                          source=str(path))  # fmt: skip
    return Settings(_tolerance(data[TOLERANCE_KEY], path), _statistic(data, path))


def _tolerance(value: object, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise AtpsimError(f"expected a fraction > 0 (0.25 = 25%), got {value!r}",
                          source=str(path), key=TOLERANCE_KEY)  # fmt: skip
    return float(value)


def _statistic(data: dict, path: Path) -> str:
    for key in data:
        if key not in (TOLERANCE_KEY, "statistic"):
            raise AtpsimError(
                f"unknown key{did_you_mean(str(key), [TOLERANCE_KEY, 'statistic'])}",
                source=str(path), key=str(key),
            )  # fmt: skip
    statistic = data.get("statistic", "median")
    if statistic not in STATISTICS:
        raise AtpsimError(f"expected one of {list(STATISTICS)}, got {statistic!r}",
                          source=str(path), key="statistic")  # fmt: skip
    return str(statistic)
