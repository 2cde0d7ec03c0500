"""Predicted against measured layer times: the plot of ``atpsim validate``.

One point per check point (a whole layer's forward+backward), log-log axes, the diagonal
y = x and the band of +-tolerance around it; colour by mesh, marker by chunk count. Saved as
PNG without a software tag, so the file changes only when the numbers do.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter  # noqa: E402

from atpsim.calibrate.compare import Comparison  # noqa: E402

_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_validation(comparison: Comparison, path: str | Path) -> Path:
    """Draw *comparison* to the PNG at *path* and return the path."""
    results = comparison.results
    measured_ms = [r.point.time_s * 1e3 for r in results]
    predicted_ms = [r.predicted_s * 1e3 for r in results]
    meshes = sorted({(r.point.d1, r.point.d2) for r in results})
    chunk_counts = sorted({r.point.chunks for r in results})
    colours = plt.get_cmap("tab10")
    figure, ax = plt.subplots(figsize=(5.5, 5.0))
    for r, x, y in zip(results, measured_ms, predicted_ms, strict=True):
        mesh_index = meshes.index((r.point.d1, r.point.d2))
        marker = _MARKERS[chunk_counts.index(r.point.chunks) % len(_MARKERS)]
        ax.scatter(x, y, color=colours(mesh_index % 10), marker=marker, s=36, zorder=3)
    low = min(measured_ms + predicted_ms) / 1.5
    high = max(measured_ms + predicted_ms) * 1.5
    tol = comparison.tolerance
    ax.plot([low, high], [low, high], color="black", linewidth=1, label="predicted = measured")
    ax.fill_between([low, high], [low * (1 - tol), high * (1 - tol)],
                    [low * (1 + tol), high * (1 + tol)], color="grey", alpha=0.2,
                    label=f"+-{tol:.0%} (tolerance)")  # fmt: skip
    _legend_and_axes(ax, meshes, chunk_counts, (low, high))
    verdict = "pass" if comparison.passed else "FAIL"
    ax.set_title(f"{comparison.folder.resolve().name}: median |error| "
                 f"{comparison.median_abs_error:.1%} ({verdict})", fontsize=10)  # fmt: skip
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(figure)
    return out


def _legend_and_axes(
    ax: Axes, meshes: list[tuple[int, int]], chunk_counts: list[int], limits: tuple[float, float]
) -> None:
    """Legend entries per mesh (colour) and chunk count (marker); log axes labelled 1-2-5."""
    colours = plt.get_cmap("tab10")
    for i, (d1, d2) in enumerate(meshes):
        ax.scatter([], [], color=colours(i % 10), marker="o", label=f"DeviceMesh({d1}, {d2})")
    for j, chunks in enumerate(chunk_counts):
        ax.scatter([], [], color="grey", marker=_MARKERS[j % len(_MARKERS)],
                   label=f"chunks = {chunks}")  # fmt: skip
    low, high = limits
    ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high),
           xlabel="measured fwd+bwd time per layer (ms)",
           ylabel="predicted (ms)")  # fmt: skip
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", linewidth=0.3)
