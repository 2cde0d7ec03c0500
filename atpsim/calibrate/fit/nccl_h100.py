"""Fit the h100 NCCL profile's Simple and NVLS NVLink efficiencies to the H100 figures.

Run ``python -m atpsim.calibrate.fit.nccl_h100`` (deterministic, a few seconds) after
``python -m atpsim.calibrate.fit.nccl_curve`` (which derives the rest of the h100 entry from
the a100 fit): it prints the two fitted values with the model's busbw at the measured figures
and rewrites their lines of the ``h100`` entry in ``atpsim/data/nccl.yaml`` (``--dry-run``:
print only).

Measured (``../shared/reference/measured-data.md``, the two "8×H100-SXM on NVSwitch (NVLink4)"
rows, [M] maintainers' figures; nt#212, nt#290, nt#309, nc#2140), both "at large sizes":

- ring all-reduce (NVLS off), reduce-scatter and all-gather: busbw ~370 GB/s;
- NVLS all-reduce: busbw ~480 GB/s.

Model: the engine itself (:func:`atpsim.engine.nccl.run_nccl`) on ``dgx-h100`` with the
protocol forced to Simple, at :data:`FIT_BYTES` (4 GiB, a "large size": the fixed costs are
under 1% of the time there), everything but the two efficiencies held at the entry's values
(the derived overheads included). Simple's NVLink efficiency is the one value minimising the
squared log errors of the three ring figures (one parameter, three figures: they differ only
by the fixed costs); NVLS's the one matching the NVLS figure exactly (one parameter, one
figure). One Simple efficiency cannot give both: NVLS's busbw over the ring's is at least
1.75 for any one efficiency while the measured ratio is 1.30, so NVLS reaches a smaller
fraction of the links than Simple's ring kernel.

No uncertainty record: a one-figure fit has no residual to bootstrap; draws of the h100 entry
vary its derived parameters (from the a100 fit's draws) and hold these two at their values.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml
from scipy.optimize import brentq, minimize_scalar

from atpsim.calibrate.fit.nccl_curve import fit_parser, rewrite
from atpsim.collectives.closed_form import bus_factor
from atpsim.collectives.protocols import profile_from_dict, with_profile
from atpsim.engine.nccl import run_nccl
from atpsim.topology.spec import load_topology

COMMAND = "python -m atpsim.calibrate.fit.nccl_h100"
#: The machine the figures were measured on, and the size fitted ("large sizes").
TOPOLOGY = "dgx-h100"
FIT_BYTES = 4 * 2**30
N_RANKS = 8
#: measured-data.md, "8×H100-SXM on NVSwitch (NVLink4)": busbw (bytes/s) per (op, algorithm).
RING_BUSBW = {("all_reduce", "ring"): 370e9, ("reduce_scatter", "ring"): 370e9,
              ("all_gather", "ring"): 370e9}
NVLS_BUSBW = {("all_reduce", "nvls"): 480e9}
PARAMS = ("simple_nvlink_efficiency", "nvls_nvlink_efficiency")


def h100_entry() -> dict[str, object]:
    """The packaged ``h100`` entry of ``nccl.yaml``."""
    text = resources.files("atpsim").joinpath("data/nccl.yaml").read_text()
    return dict(yaml.safe_load(text)["h100"])


def busbw_Bps(entry: dict[str, object], op: str, algorithm: str, nbytes: float = FIT_BYTES
              ) -> float:
    """The engine's busbw of *op* by *algorithm* (Simple) on dgx-h100 with NCCL profile *entry*."""
    values = tuple(float(entry[k]) for k in PARAMS)  # type: ignore[arg-type]
    profile = profile_from_dict(f"h100-fit~{values[0]!r}~{values[1]!r}", entry)
    topology = with_profile(load_topology(TOPOLOGY), profile)
    call = run_nccl(topology, op, algorithm, [list(range(N_RANKS))], nbytes, protocol="Simple")
    return bus_factor(op, N_RANKS) * nbytes / call.time_s


def _log_error(entry: dict[str, object], figures: dict[tuple[str, str], float]) -> list[float]:
    return [math.log(busbw_Bps(entry, op, alg) / bw) for (op, alg), bw in figures.items()]


def fit() -> dict[str, float]:
    """The two efficiencies (:data:`PARAMS`), module docstring."""
    entry = h100_entry()
    simple = minimize_scalar(
        lambda e: sum(r * r for r in _log_error({**entry, PARAMS[0]: e}, RING_BUSBW)),
        bounds=(0.3, 1.0), method="bounded", options={"xatol": 1e-7}).x  # fmt: skip
    entry[PARAMS[0]] = float(simple)
    nvls = brentq(lambda e: _log_error({**entry, PARAMS[1]: e}, NVLS_BUSBW)[0], 0.2, 1.0,
                  xtol=1e-9)  # fmt: skip
    return {PARAMS[0]: float(simple), PARAMS[1]: float(nvls)}


def fit_lines(params: dict[str, float]) -> list[str]:
    """The fitted values and the model's busbw against each measured figure (GB/s)."""
    entry = {**h100_entry(), **params}
    lines = [f"h100 (fitted at {FIT_BYTES / 2**30:g} GiB): "
             f"{ {k: float(f'{v:.4g}') for k, v in params.items()} }"]
    for (op, alg), bw in {**RING_BUSBW, **NVLS_BUSBW}.items():
        model = busbw_Bps(entry, op, alg)
        lines.append(f"  {op:>14} {alg:>4}  measured {bw / 1e9:5.0f}  model {model / 1e9:6.1f}"
                     f" GB/s  {model / bw - 1:+.1%}")  # fmt: skip
    return lines


def rewrite_data_file(params: dict[str, float]) -> Path:
    """Rewrite the two fitted lines of the packaged ``nccl.yaml``'s h100 entry."""
    path = Path(str(resources.files("atpsim").joinpath("data/nccl.yaml")))
    note = (f"fitted by {COMMAND} (measured-data.md '8×H100-SXM on NVSwitch' rows, "
            f"{FIT_BYTES // 2**30} GiB)")
    path.write_text(rewrite(path.read_text(), "h100", params, note))
    return path


def main(argv: list[str] | None = None) -> int:
    """The command (module docstring): fit, print, rewrite the data file."""
    args = fit_parser(__doc__).parse_args(argv)
    params = fit()
    for line in fit_lines(params):
        print(line)
    if not args.dry_run:
        print(f"rewrote {rewrite_data_file(params)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
