"""The hierarchical communication matrix as text (for ``atpsim hcm``) and as a JSON-ready dict.

Bandwidths are printed in GB/s (10^9 bytes/s) per direction; the dict keeps bytes/s. Groups of a
layer whose ranks have the same P2P matrix and group bandwidths are printed once, with the GPUs
of the others listed, so a 64-node cluster prints one node's matrix, not 64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from atpsim.analytic.hcm import HcmGroup, HcmLayer, HierarchicalCommMatrix

#: Matrices with more ranks than this are summarized (the JSON output has them in full).
MAX_PRINTED_RANKS = 32


def hcm_to_dict(hcm: HierarchicalCommMatrix) -> dict[str, Any]:
    """Every layer, group, rank, P2P matrix and group bandwidth, in bytes/s per direction."""
    return {
        "topology": hcm.topology_name,
        "n_gpus": hcm.n_gpus,
        "bandwidth_unit": "bytes/s per direction",
        "layers": [
            {
                "layer": layer.number,
                "ranks_per_group": list(layer.ranks_per_group),
                "groups": [_group_dict(group) for group in layer.groups],
            }
            for layer in hcm.layers
        ],
    }


def _group_dict(group: HcmGroup) -> dict[str, Any]:
    return {
        "gpus": list(group.gpus),
        "formed_by": group.formed_by,
        "ranks": [list(rank) for rank in group.ranks],
        "p2p_Bps": group.p2p_matrix_Bps().tolist(),
        "group_Bps": group.group_bandwidths_Bps().tolist(),
    }


#: What a shortened list of values says after it by default: where to find them all.
ALL_VALUES = " (hcm_to_dict has all)"


def format_hcm(hcm: HierarchicalCommMatrix, all_values: str = ALL_VALUES) -> str:
    """A readable listing of the matrix, one block per layer; a list of values cut short
    ends with *all_values* (where the caller's reader finds them all)."""
    lines = [
        f"Hierarchical communication matrix of {hcm.topology_name} ({hcm.n_gpus} GPUs); "
        "bandwidths in GB/s per direction"
    ]
    if not hcm.layers:
        lines.append("  (a single GPU: no layers)")
    for layer in hcm.layers:
        lines.extend(_layer_lines(layer, all_values))
    return "\n".join(lines)


def _layer_lines(layer: HcmLayer, all_values: str) -> list[str]:
    sizes = "/".join(map(str, layer.ranks_per_group))
    lines = [""]
    for members in _identical_groups(layer.groups):
        group = layer.groups[members[0]]
        head = f"Layer {layer.number}: R = {sizes} ranks per group"
        if len(layer.groups) > 1:
            others = ", ".join(gpu_span(layer.groups[i].gpus) for i in members)
            count = f"{len(members)} of {len(layer.groups)} groups"
            head += (
                f"; {count}, same matrix: GPUs {others}" if len(members) > 1 else f"; GPUs {others}"
            )
        lines.append(head)
        lines.append(f"  ranks: {group.formed_by}")
        lines.append("    " + _ranks_text(group))
        lines.extend(_matrix_lines(group, all_values))
    return lines


def _ranks_text(group: HcmGroup) -> str:
    if all(len(rank) == 1 for rank in group.ranks):
        return f"one GPU each: GPUs {gpu_span(group.gpus)} in rank order"
    shown = [f"{i}: {gpu_span(rank)}" for i, rank in enumerate(group.ranks)]
    if len(shown) > MAX_PRINTED_RANKS:
        shown = [*shown[:MAX_PRINTED_RANKS], f"... ({len(shown)} ranks)"]
    return "  ".join(shown)


def _identical_groups(groups: tuple[HcmGroup, ...]) -> list[list[int]]:
    """Indices of the layer's groups, bunched by equal rank sizes, P2P and group bandwidths (the
    first one's description stands for all)."""
    bunches: dict[Any, list[int]] = {}
    for index, group in enumerate(groups):
        key = (
            tuple(len(rank) for rank in group.ranks),
            group.p2p_matrix_Bps().round(-3).tobytes(),
            group.group_bandwidths_Bps().round(-3).tobytes(),
        )
        bunches.setdefault(key, []).append(index)
    return list(bunches.values())


def _matrix_lines(group: HcmGroup, all_values: str) -> list[str]:
    p2p = group.p2p_matrix_Bps() / 1e9
    bandwidth = group.group_bandwidths_Bps() / 1e9
    n = group.n_ranks
    off_diagonal = p2p[~np.eye(n, dtype=bool)]
    if n > MAX_PRINTED_RANKS or (n > 2 and np.ptp(off_diagonal) == 0):
        lines = ["  P2P: " + _value_summary(off_diagonal, "pairs", all_values)]
        return [*lines, "  group bandwidth: " + _value_summary(bandwidth, "ranks", all_values)]
    width = max(7, *(len(_gb(v)) + 2 for v in p2p.ravel()))
    lines = ["  P2P:", "    " + " " * 4 + "".join(f"{j:>{width}}" for j in range(n))]
    for i in range(n):
        cells = "".join(f"{'-' if i == j else _gb(p2p[i, j]):>{width}}" for j in range(n))
        lines.append(f"    {i:>4}{cells}")
    lines.append("  group bandwidth:")
    lines.append("    " + " " * 4 + "".join(f"{_gb(v):>{width}}" for v in bandwidth))
    return lines


def _value_summary(values: np.ndarray, what: str, all_values: str) -> str:
    distinct, counts = np.unique(values.round(6), return_counts=True)
    if len(distinct) == 1:
        return f"{_gb(distinct[0])} for all {len(values)} {what}"
    parts = [f"{_gb(v)} ({c} {what})" for v, c in zip(distinct[::-1], counts[::-1], strict=True)]
    return ", ".join(parts[:6]) + (", ..." if len(parts) > 6 else "") + all_values


def _gb(value: float) -> str:
    return f"{value:.4g}" if value < 1000 else f"{value:.0f}"


def gpu_span(gpus: tuple[int, ...] | list[int]) -> str:
    """'0-3' for consecutive ranks, '0,2,4' otherwise (runs compressed: '0-3,8-11')."""
    runs: list[list[int]] = []
    for gpu in gpus:
        if runs and gpu == runs[-1][1] + 1:
            runs[-1][1] = gpu
        else:
            runs.append([gpu, gpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
