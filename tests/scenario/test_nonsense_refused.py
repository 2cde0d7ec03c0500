"""Issue 11, section 2: values a user cannot have meant are refused (or flagged), each with
one message naming the key and what was expected."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from atpsim.errors import AtpsimError, ScenarioError
from atpsim.report.chunk_table import chunk_table
from atpsim.report.tables import uneven_heads_note
from atpsim.scenario.loader import load_scenario
from atpsim.units import parse_bandwidth_text, parse_time_text


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (25, "bare number"),
        ("25", "bare number"),
        (25e9, "bare number"),
        (float("inf"), "bare number"),
        ("inf GB/s", "expected a positive bandwidth"),
        ("1e-300 GB/s", "1 MB/s to 100 TB/s"),
        ("1000 TB/s", "1 MB/s to 100 TB/s"),
        ("-25 GB/s", "positive"),
        ("0 GB/s", "positive"),
        (True, "expected a positive bandwidth"),
        ("25 GHz", "expected a positive bandwidth"),
    ],
)
def test_bandwidths_need_a_unit_and_a_sane_value(value, fragment):
    with pytest.raises(AtpsimError, match=fragment):
        parse_bandwidth_text(value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(1e-6, "bare number"), ("-1 us", ">= 0"), ("2 s", "0 s to 1 s"), ("1 parsec", "non-negative time")],
)
def test_latencies_need_a_unit_and_a_sane_value(value, fragment):
    with pytest.raises(AtpsimError, match=fragment):
        parse_time_text(value)


def test_accepted_forms_and_force():
    assert parse_bandwidth_text("200 Gb/s") == 25e9
    assert parse_bandwidth_text("1.5 GiB/s") == 1.5 * 2**30
    assert parse_time_text("0.6 us") == pytest.approx(0.6e-6)
    assert parse_time_text("0 s") == 0.0
    assert parse_bandwidth_text("0.5 MB/s", force=True) == 5e5
    with pytest.raises(AtpsimError, match="bare number"):
        parse_bandwidth_text(25, force=True)  # force widens the range, never drops the unit


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_a_bare_bandwidth_in_a_scenario_names_the_key(tmp_path):
    path = write(tmp_path, "name: s\ntopology: {builder: torus, dims: [2, 2], link_bandwidth: 25}\n"
                           "model: M1\n")  # fmt: skip
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.key == "topology.link_bandwidth"
    assert "bare number" in info.value.message and str(path) in info.value.format()


def test_force_in_a_scenario_accepts_an_odd_value(tmp_path):
    path = write(tmp_path, "name: s\ntopology: {builder: torus, dims: [2, 2], link_bandwidth: "
                           "'0.5 MB/s', force: true}\nmodel: M1\n")  # fmt: skip
    scenario = load_scenario(path)
    assert scenario.topologies[0].params == {"dims": [2, 2], "link_bandwidth_Bps": "0.5 MB/s"}


def test_two_topologies_with_one_label_are_refused(tmp_path):
    path = write(tmp_path, "name: s\ntopology:\n  - {preset: ic3, label: a}\n"
                           "  - {preset: ic1, label: a}\nmodel: M1\n")  # fmt: skip
    with pytest.raises(ScenarioError, match="label 'a' already names another topology") as info:
        load_scenario(path)
    assert info.value.key == "topology[1]"


def test_the_same_topology_twice_under_one_label_is_fine(tmp_path):
    path = write(tmp_path, "name: s\ntopology:\n  - {preset: ic3, label: a}\n"
                           "  - {preset: ic3, label: a}\nmodel: M1\n")  # fmt: skip
    load_scenario(path)


def _rows(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


def test_heads_that_do_not_divide_over_the_mesh_are_flagged():
    frame = _rows(heads=[63, 63, 64], d1=[2, 1, 2], d2=[2, 1, 4], status=["ok", "ok", "ok"])
    note = uneven_heads_note(frame)
    assert note is not None and note.startswith("Note: 1 of the 3") and "63 heads on 2x2" in note
    assert uneven_heads_note(frame.iloc[1:]) is None


def test_the_chunk_table_says_when_another_mesh_is_faster_with_chunks():
    """Baseline: mesh 2x1 is best (10 vs 9). With 2 chunks the chunk row keeps 2x1 (11) but
    1x2 reaches 12: the cell shows both, and the caption says why."""
    metric = "tflops_per_gpu_paper_unit"
    base = {"topology": "t", "n_devices": 2, "hardware": "h", "algorithm": "ring", "batch": 4,
            "seq": 8, "dtype": "fp16", "model": "M", "hidden": 8, "heads": 2, "layers": 1,
            "mode": "des", "placement": "row-major", "status": "ok"}  # fmt: skip
    rows = [
        {**base, "mesh": "2x1", "chunks": 1, metric: 10.0},
        {**base, "mesh": "1x2", "chunks": 1, metric: 9.0},
        {**base, "mesh": "2x1", "chunks": 2, metric: 11.0},
        {**base, "mesh": "1x2", "chunks": 2, metric: 12.0},
    ]
    frame = pd.DataFrame(rows).assign(tflops_per_gpu=lambda f: f[metric])
    table = chunk_table(frame)
    assert table is not None
    cells = {row[1]: row[2] for row in table.rows}
    assert cells["Baseline"] == "10.00 [2x1]"
    assert cells["Chunk=2"] == "11.00 [2x1] · best 12.00 [1x2]"
    assert "keep the Baseline's mesh" in table.caption
