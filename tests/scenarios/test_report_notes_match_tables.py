"""Numbers quoted in a scenario's report prose come from its committed results table.

The committed tables are held to a new simulation elsewhere
(test_committed_results_are_current.py); this holds the Figure 12 prose to the table, so that
a regenerated table with moved numbers fails until the text is rewritten too.
"""

from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _ic5_comm_over_delta(frame: pd.DataFrame, n_devices: int) -> dict[str, float]:
    """ATP-1, ATP-2, ATP-4 (DeviceMesh(N/i, i)) and ATP-OPT (least of every mesh), simulated."""
    rows = frame[
        (frame.topology == "ic5") & (frame["mode"] == "des") & (frame.n_devices == n_devices)
    ]
    values = {f"ATP-{i}": float(rows[rows.d2 == i].comm_over_delta.iloc[0]) for i in (1, 2, 4)}
    values["ATP-OPT"] = float(rows.comm_over_delta.min())
    return values


def test_figure_12_prose_quotes_the_table():
    notes = yaml.safe_load((ROOT / "scenarios" / "fig12.yaml").read_text())["report"]["notes"]
    prose = " ".join(notes.split())
    frame = pd.read_csv(ROOT / "reports" / "fig12" / "results.csv")
    small, large = _ic5_comm_over_delta(frame, 16), _ic5_comm_over_delta(frame, 4096)
    assert f"({small['ATP-1']:.2f} to {large['ATP-1']:.2f} Delta)" in prose
    assert f"ATP-2's ({small['ATP-2']:.2f} to {large['ATP-2']:.2f})" in prose
    assert f"ATP-4's ({small['ATP-4']:.2f} to {large['ATP-4']:.2f})" in prose
    assert f"ATP-OPT falls to {large['ATP-OPT']:.2f} Delta" in prose
    assert large["ATP-1"] > small["ATP-1"] and large["ATP-2"] < small["ATP-2"]
    assert large["ATP-4"] < small["ATP-4"]
