"""Fit the A100 NCCL profile (``atpsim/data/nccl.yaml``) to the Azure ND A100 v4 busbw curve.

Run ``python -m atpsim.calibrate.fit.nccl_curve`` (deterministic, about a second): it fits the
four effective parameters of the ``a100`` entry, derives the ``h100`` entry from them and the
spec, prints both with the residuals, and rewrites their lines of the data file
(``--dry-run``: print only).

Model (:mod:`atpsim.collectives.protocols`), 8 GPUs on one NVSwitch at the NVLink3 spec
(B = 300 GB/s per direction, 0.6 us per GPU-GPU path), ring all-reduce, protocol P:

    t_P(S) = base_P + 14 step_P(nvlink) + overhead_P + 14 (0.6 us + S/8 / (B eff_P))

which is the engine's time on a contention-free switch (the closed form, held to the engine by
tests). The protocol of each size is the fastest (NCCL's tuner). Fitted: ``eff`` and
``overhead`` of Simple and LL128 (LL has no measured size: it follows LL128 by the line
formats and gets no overhead), by Nelder-Mead on the squared log errors of busbw at all eight
sizes (:data:`~atpsim.calibrate.fit.nccl_overhead.AZURE_A100_ALLREDUCE`, measured-data.md
'All-reduce', AZ [M]).

H100 (no NCCL curve in the shared data): LL128's efficiency x (376/450) / (274/300), the
measured GPU-GPU NVLink copy fractions of H100 and A100 (measured-data.md 'Links', MLE [M]);
overheads x 300/450 (Simple's overhead is its pipeline fill, chunks moving at the link rate).
Simple's and NVLS's NVLink efficiencies are fitted to the two H100 figures at large sizes by
``python -m atpsim.calibrate.fit.nccl_h100`` (run it after this command).

Uncertainty (written beside the values, the a100 entry's ``uncertainty`` block; the h100
entry's says it is derived): a **residual bootstrap**
(:func:`atpsim.calibrate.uncertainty.estimate.residual_bootstrap`), 200 replicates, seed 0:
the eight log residuals resampled onto the fitted curve, refitted from the fitted values. Not
the least-squares covariance, because LL128's overhead sits at its bound (0), where the
Jacobian says nothing, and the tuner's choice of protocol per size makes the loss a minimum of
branches, not smooth where it switches; a refit costs a fraction of a second, so 200 are
affordable. The sigmas are those of the values themselves (linear: an overhead may be 0);
draws are clipped to the fit's bounds.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import minimize

from atpsim.calibrate.fit.nccl_overhead import AZURE_A100_ALLREDUCE, N_RANKS
from atpsim.calibrate.uncertainty.estimate import (
    REPLICATES,
    bootstrap_covariance,
    residual_bootstrap,
)
from atpsim.calibrate.uncertainty.record import FitUncertainty, record_from_covariance
from atpsim.collectives.closed_form import bus_factor, collective_time_s
from atpsim.collectives.protocols import PROTOCOLS, latency_s, profile_from_dict

NVLINK3_BPS = 300e9
NVLINK4_BPS = 450e9
PATH_LATENCY_S = 0.6e-6
COPY_FRACTION = {"a100": 274 / 300, "h100": 376 / 450}
PARAMS = ("simple_nvlink_efficiency", "ll128_nvlink_efficiency", "simple_overhead_s",
          "ll128_overhead_s")
START = (0.78, 0.5, 2e-4, 1e-5)
COMMAND = "python -m atpsim.calibrate.fit.nccl_curve"
#: The fit's bounds (efficiencies a fraction of the link, overheads >= 0), as draws clip.
BOUNDS = {"simple_nvlink_efficiency": (0.05, 1.0), "ll128_nvlink_efficiency": (0.05, 1.0),
          "simple_overhead_s": (0.0, None), "ll128_overhead_s": (0.0, None)}
BOOTSTRAP_WHY = ("residual bootstrap, not the Jacobian covariance: ll128_overhead_s sits at "
                 "its bound (0) and the tuner's protocol choice per size makes the loss "
                 "non-smooth; a refit costs a fraction of a second")
DERIVED_WHY = ("the h100 entry's derived parameters are drawn as a100's draws, derived again; "
               "its two fitted efficiencies (one figure each, no residual) are held")


@dataclass(frozen=True)
class CurveFit:
    """The fitted *params* (:data:`PARAMS`), the busbw (bytes/s) and protocol they predict
    per measured size, and the relative errors."""

    params: dict[str, float]
    predicted_Bps: tuple[float, ...]
    protocols: tuple[str, ...]
    errors: tuple[float, ...]


def predict(params: dict[str, float], nbytes: float,
            bandwidth_Bps: float = NVLINK3_BPS) -> tuple[float, str]:
    """(busbw in bytes/s, protocol) of an 8-GPU NVSwitch ring all-reduce of *nbytes*."""
    profile = profile_from_dict("fit", {**params, "net_efficiency": 1.0})
    times = {}
    for p in PROTOCOLS:
        steps = ["nvlink"] * (2 * (N_RANKS - 1))
        eff = profile.efficiency[p]["nvlink"]
        link = collective_time_s("all_reduce", "ring", N_RANKS, nbytes, bandwidth_Bps * eff,
                                 PATH_LATENCY_S)
        times[p] = latency_s(p, "ring", steps, profile) + link
    best = min(times, key=lambda k: times[k])
    return bus_factor("all_reduce", N_RANKS) * nbytes / times[best], best


Curve = tuple[tuple[int, float], ...]


def _loss(x: np.ndarray, data: Curve = AZURE_A100_ALLREDUCE) -> float:
    return float(np.sum(np.square(_log_residuals(dict(zip(PARAMS, _bounded(x), strict=True)),
                                                 data))))  # fmt: skip


def _log_residuals(params: dict[str, float], data: Curve) -> np.ndarray:
    """ln(model busbw / measured busbw) per size of *data*."""
    return np.array([np.log(predict(params, n)[0] / bw) for n, bw in data])


def _bounded(x: np.ndarray) -> list[float]:
    """Efficiencies in (0, 1], overheads >= 0."""
    return [float(np.clip(x[0], 0.05, 1.0)), float(np.clip(x[1], 0.05, 1.0)),
            float(max(x[2], 0.0)), float(max(x[3], 0.0))]


_SCALE = np.array([1.0, 1.0, 1e-4, 1e-5])


def _minimise(data: Curve, start: tuple[float, ...]) -> dict[str, float]:
    """Nelder-Mead on the squared log errors of *data* from *start* (scaled so its steps are
    alike)."""
    result = minimize(lambda y: _loss(y * _SCALE, data), np.array(start) / _SCALE,
                      method="Nelder-Mead",
                      options={"xatol": 1e-6, "fatol": 1e-12, "maxiter": 4000})  # fmt: skip
    return dict(zip(PARAMS, _bounded(result.x * _SCALE), strict=True))


def fit() -> CurveFit:
    """Fit :data:`PARAMS` to the Azure curve."""
    params = _minimise(AZURE_A100_ALLREDUCE, START)
    rows = [predict(params, n) for n, _ in AZURE_A100_ALLREDUCE]
    errors = tuple(bw / m - 1 for (bw, _), (_, m) in zip(rows, AZURE_A100_ALLREDUCE, strict=True))
    return CurveFit(params, tuple(r[0] for r in rows), tuple(r[1] for r in rows), errors)


def bootstrap(result: CurveFit, replicates: int = REPLICATES) -> FitUncertainty:
    """The residual bootstrap of *result* (module docstring) as the a100 entry's record."""
    residuals = _log_residuals(result.params, AZURE_A100_ALLREDUCE)
    sizes = [n for n, _ in AZURE_A100_ALLREDUCE]
    fitted_log = np.log(result.predicted_Bps)
    start = tuple(result.params[k] for k in PARAMS)

    def refit(log_busbw: np.ndarray) -> list[float]:
        params = _minimise(tuple(zip(sizes, np.exp(log_busbw), strict=True)), start)
        return [params[k] for k in PARAMS]

    # measured = model / exp(residual): ln measured* = ln model - a resampled residual
    rows = residual_bootstrap(fitted_log, -residuals, refit, replicates=replicates)
    return record_from_covariance(
        "nccl:a100", "bootstrap", BOOTSTRAP_WHY, PARAMS, bootstrap_covariance(rows), "linear",
        BOUNDS, residual_rms=float(np.sqrt(np.mean(residuals**2))),
        dof=len(residuals) - len(PARAMS), replicates=replicates,
    )  # fmt: skip


def derive(name: str, a100: dict[str, float]) -> dict[str, float]:
    """Profile *name*'s parameters derived from the a100 ones (:data:`DERIVED`)."""
    return DERIVED[name](a100)


def derive_h100(a100: dict[str, float]) -> dict[str, float]:
    """The h100 entry's derived parameters from the a100 fit and the spec (module docstring;
    Simple's and NVLS's efficiencies are fitted: :mod:`atpsim.calibrate.fit.nccl_h100`)."""
    copy = COPY_FRACTION["h100"] / COPY_FRACTION["a100"]
    rate = NVLINK3_BPS / NVLINK4_BPS
    return {"ll128_nvlink_efficiency": a100["ll128_nvlink_efficiency"] * copy,
            "simple_overhead_s": a100["simple_overhead_s"] * rate,
            "ll128_overhead_s": a100["ll128_overhead_s"] * rate}


#: Profiles derived from the a100 fit, by name.
DERIVED = {"h100": derive_h100}


def rewrite(text: str, entry: str, values: dict[str, float], note: str,
            uncertainty: dict[str, object] | None = None) -> str:
    """*text* (nccl.yaml) with each of *values*' lines of *entry* rewritten, *note* after, and
    the entry's ``uncertainty`` block replaced by *uncertainty* (when given)."""
    head, _, rest = text.partition(f"\n{entry}:\n")
    body, sep, tail = rest.partition("\n\n")
    for key, value in values.items():
        body = re.sub(rf"^(  {key}:) .*$", rf"\1 {value:.4g}  # {note}", body, count=1,
                      flags=re.M)  # fmt: skip
    if uncertainty is not None:
        end = "\n" if body.endswith("\n") else ""
        body = body.split("\n  uncertainty:", 1)[0].rstrip("\n")
        pairs = uncertainty.get("correlation")
        block = yaml.safe_dump({"uncertainty": {k: v for k, v in uncertainty.items()
                                                if k != "correlation"}},
                               sort_keys=False, width=1000, default_flow_style=None)  # fmt: skip
        if pairs is not None:  # one pair a line
            pair_lines = yaml.safe_dump({"correlation": pairs}, sort_keys=False, width=1000,
                                        default_flow_style=False).rstrip("\n")  # fmt: skip
            block += "  " + pair_lines.replace("\n", "\n  ") + "\n"
        body += "\n" + "\n".join(f"  {line}" for line in block.rstrip("\n").split("\n")) + end
    return f"{head}\n{entry}:\n{body}{sep}{tail}"


def rms_error(result: CurveFit) -> float:
    """The RMS of *result*'s relative busbw errors."""
    return float(np.sqrt(np.mean(np.square(result.errors))))


def fit_lines(result: CurveFit) -> list[str]:
    """The fit as the command prints it: the a100 parameters, the h100 ones derived from
    them, and the measured against modelled busbw (GB/s) per size with its protocol."""
    a100 = {k: float(f"{v:.4g}") for k, v in result.params.items()}
    h100 = {k: float(f"{v:.4g}") for k, v in derive_h100(result.params).items()}
    lines = [f"a100 (fitted, {rms_error(result):.1%} RMS): {a100}", f"h100 (derived): {h100}"]
    for (n, bw), pred, proto, err in zip(AZURE_A100_ALLREDUCE, result.predicted_Bps,
                                         result.protocols, result.errors, strict=True):  # fmt: skip
        lines.append(f"  {n:>12} B  measured {bw / 1e9:7.2f}  model {pred / 1e9:7.2f} GB/s"
                     f"  {proto:>6}  {err:+.1%}")  # fmt: skip
    return lines


def sigma_line(record: FitUncertainty) -> str:
    """The bootstrap's 1-sigma per a100 parameter, as the command prints it."""
    sigmas = {p.name: float(f"{p.sigma:.3g}") for p in record.parameters}
    return f"a100 1-sigma (residual bootstrap, {REPLICATES} replicates): {sigmas}"


def rewrite_data_file(result: CurveFit, record: FitUncertainty) -> Path:
    """Rewrite the a100 entry of the packaged ``nccl.yaml`` with *result* and its *record*,
    and the h100 entry with the values derived from it; return the file's path."""
    path = Path(str(resources.files("atpsim").joinpath("data/nccl.yaml")))
    text = rewrite(path.read_text(), "a100", result.params,
                   f"fitted by {COMMAND} (RMS {rms_error(result):.1%} over the Azure curve)",
                   record.to_dict())  # fmt: skip
    text = rewrite(text, "h100", derive_h100(result.params), f"derived from a100 by {COMMAND}",
                   {"derived_from": "a100", "why": DERIVED_WHY})  # fmt: skip
    path.write_text(text)
    return path


def fit_parser(doc: str | None) -> argparse.ArgumentParser:
    """A fit command's arguments: ``--dry-run`` (print; do not rewrite the data file)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print; do not rewrite the file")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command (module docstring): fit, print, bootstrap, print, rewrite the data file."""
    args = fit_parser(__doc__).parse_args(argv)
    result = fit()
    for line in fit_lines(result):
        print(line)
    record = bootstrap(result)
    print(sigma_line(record))
    if not args.dry_run:
        print(f"rewrote {rewrite_data_file(result, record)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
