"""A job scenario's report: the best configuration per TP scheme, the verdict sentence computed
from those rows, and a deterministic breakdown figure."""

from __future__ import annotations

from typing import Any

import pandas as pd

from atpsim.report.build import build_report
from atpsim.report.job_tables import best_rows, verdicts
from atpsim.results.io import read_results, to_frame, write_results
from atpsim.results.schema import JOB_SCHEMA

SCENARIO = "name: made-up\ndescription: Rows made by hand.\n"


def row(index: int, mesh: str, pp: int, seconds: float, fits: bool = True, **more: Any) -> dict[str, Any]:
    """A job row on 64 GPUs: *seconds* per iteration, split 60/20/10/5/5 % into compute,
    exposed TP, exposed DP, bubble and other; 256 samples at 2e15 model FLOP each."""
    d1, d2 = (int(v) for v in mesh.split("x"))
    values = {
        "scenario": "made-up", "point_key": f"k{index}", "topology": "ib-cluster:8x8",
        "hardware": "a100-sxm4-80gb", "model": "gpt3-13b", "hidden": 5120, "heads": 40,
        "layers": 40, "seq": 2048, "vocab": 51200, "dtype": "fp16", "n_devices": 64,
        "tp_scheme": "megatron-1d" if d2 == 1 else "atp-2d", "d1": d1, "d2": d2, "tp_mesh": mesh,
        "tp": d1 * d2, "pp": pp, "dp": 64 // (d1 * d2 * pp), "micro_batch": 1, "global_batch": 256,
        "schedule": "1f1b", "fits_memory": fits, "memory_per_rank_bytes": 40e9 if fits else 90e9,
        "status": "ok", "point_index": index,
    }  # fmt: skip
    if fits:
        values.update(iteration_time_s=seconds, samples_per_s=256 / seconds,
                      tflops_per_gpu=256 * 2e15 / seconds / 64 / 1e12, mfu=0.5,
                      compute_s=0.6 * seconds, exposed_tp_comm_s=0.2 * seconds,
                      exposed_dp_comm_s=0.1 * seconds, pipeline_bubble_s=0.05 * seconds,
                      other_s=0.05 * seconds)  # fmt: skip
    return {**values, **more}


ROWS = [
    row(0, "8x1", 1, 10.0),
    row(1, "8x1", 2, 9.0),  # Megatron-LM's best
    row(2, "4x2", 1, 8.0, fits=False),  # would win, but does not fit
    row(3, "4x2", 2, 7.5),  # ATP's best
    row(4, "2x4", 2, 8.5),
]


def test_best_rows_keep_the_fastest_fitting_layout_of_each_scheme():
    best = best_rows(to_frame(ROWS, JOB_SCHEMA))
    assert list(best["point_key"]) == ["k1", "k3"]


def test_the_verdict_is_computed_from_the_rows():
    """9.0 s against 7.5 s: ATP is 9.0 / 7.5 - 1 = 20.0 % faster."""
    (sentence,) = verdicts(to_frame(ROWS, JOB_SCHEMA))
    assert sentence.startswith("gpt3-13b on ib-cluster:8x8 (a100-sxm4-80gb), 64 GPUs, global batch 256: yes,")
    assert "ATP's best 2D mesh (4x2, pp 2, dp 4, micro-batch 1) takes 7.5 s" in sentence
    assert "Megatron-LM's best 1D TP (8x1, pp 2, dp 4, micro-batch 1) 9 s" in sentence
    assert sentence.endswith("ATP is 20.0% faster.")


def test_the_verdict_says_no_when_megatron_wins_and_when_a_side_is_missing():
    slower = [row(0, "8x1", 1, 6.0), row(1, "4x2", 1, 7.5)]
    (sentence,) = verdicts(to_frame(slower, JOB_SCHEMA))
    assert ": no, " in sentence and sentence.endswith("Megatron-LM is 25.0% faster.")
    (alone,) = verdicts(to_frame([row(0, "8x1", 1, 6.0)], JOB_SCHEMA))
    assert "no ATP 2D mesh was simulated that fits in memory" in alone


def test_one_verdict_per_device_count():
    rows = [*ROWS, row(5, "8x1", 1, 4.0, n_devices=128, dp=16), row(6, "2x4", 1, 5.0, n_devices=128, dp=16)]
    sentences = verdicts(to_frame(rows, JOB_SCHEMA))
    assert [s.split(": ")[0] for s in sentences] == [
        "gpt3-13b on ib-cluster:8x8 (a100-sxm4-80gb), 64 GPUs, global batch 256",
        "gpt3-13b on ib-cluster:8x8 (a100-sxm4-80gb), 128 GPUs, global batch 256",
    ]
    assert sentences[1].endswith("Megatron-LM is 25.0% faster.")


def test_the_job_report_builds_and_rebuilds_byte_for_byte(tmp_path):
    write_results(tmp_path, to_frame(ROWS, JOB_SCHEMA), parquet=False)
    frame = read_results(tmp_path)
    assert list(frame.columns) == list(JOB_SCHEMA.names)
    build_report(tmp_path, frame, SCENARIO)
    first = {p.name: p.read_bytes() for p in (tmp_path / "figures").iterdir()}
    md = (tmp_path / "report.md").read_text()
    build_report(tmp_path, frame, SCENARIO)
    assert {p.name: p.read_bytes() for p in (tmp_path / "figures").iterdir()} == first
    assert set(first) == {"job_breakdown.png", "job_breakdown.svg"}
    assert (tmp_path / "report.md").read_text() == md
    assert "## Does ATP's best 2D mesh beat Megatron-LM's 1D TP?" in md
    assert "ATP is 20.0% faster." in md
    assert "| ib-cluster:8x8 | gpt3-13b | 64 | ATP 2D | 4x2 |  | 2 | 4 |" in md


def test_times_within_a_thousandth_are_a_tie():
    (sentence,) = verdicts(to_frame([row(0, "8x1", 1, 8.000), row(1, "4x2", 1, 8.004)], JOB_SCHEMA))
    assert ": a tie, " in sentence and sentence.endswith("within 0.1% of each other.")


def test_the_best_table_and_verdict_say_whether_sequence_parallelism_ran():
    """A 1D layout's sequence parallelism is a swept setting: the best table has a column for
    it and the verdict names it, so the row can be reproduced (issue 23)."""
    from atpsim.report.job_tables import BEST_COLUMNS, layout_text

    assert "sequence_parallel" in BEST_COLUMNS
    row = pd.Series({"tp_mesh": "8x1", "pp": 2, "dp": 4, "micro_batch": 1, "sequence_parallel": True})
    assert layout_text(row) == "8x1, sequence parallelism, pp 2, dp 4, micro-batch 1"
    assert layout_text(row.drop("sequence_parallel")) == "8x1, pp 2, dp 4, micro-batch 1"
    assert layout_text(pd.Series({**row.to_dict(), "sequence_parallel": False})) == "8x1, pp 2, dp 4, micro-batch 1"


def test_the_best_table_carries_every_setting_the_sweep_varied():
    """Chunks and recomputation vary in these rows, ZeRO does not: the best table shows the
    first two after the schedule (so a row can be written back into a scenario), not ZeRO."""
    from atpsim.report.job_tables import best_table

    rows = [row(0, "8x1", 2, 9.0, chunks=1, recompute="selective", zero=1),
            row(1, "4x2", 2, 7.5, chunks=2, recompute="full", zero=1)]  # fmt: skip
    table = best_table(to_frame(rows, JOB_SCHEMA))
    assert table is not None
    at = table.header.index("schedule")
    assert table.header[at + 1 : at + 3] == ["chunks", "recompute"]
    assert "zero" not in table.header
    assert table.rows[1][at + 1 : at + 3] == ["2", "full"]


def test_expert_parallelism_and_the_partition_are_columns_where_swept():
    """Two layouts that differ only by ep (and partition) read apart in the best table."""
    from atpsim.report.job_tables import best_table

    rows = [row(0, "8x1", 2, 9.0, ep=1, partition="even"), row(1, "4x2", 2, 7.5, ep=8, partition="5/3")]
    table = best_table(to_frame(rows, JOB_SCHEMA))
    assert table is not None and {"ep", "partition"} <= set(table.header)
    assert [r[table.header.index("ep")] for r in table.rows] == ["1", "8"]


def test_a_layout_in_words_names_cp_ep_and_an_uneven_partition():
    from atpsim.report.job_tables import layout_text

    row = pd.Series({"tp_mesh": "8x1", "pp": 16, "dp": 16, "micro_batch": 1, "sequence_parallel": True,
                     "cp": 2, "ep": 1, "partition": "7/8/8/7"})
    assert layout_text(row) == "8x1, sequence parallelism, cp 2, pp 16 [7/8/8/7], dp 16, micro-batch 1"
    plain = pd.Series({"tp_mesh": "4x2", "pp": 2, "dp": 4, "micro_batch": 1, "ep": 8, "partition": "even"})
    assert layout_text(plain) == "4x2, pp 2, dp 4, ep 8, micro-batch 1"
