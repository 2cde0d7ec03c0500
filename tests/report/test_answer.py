"""The answer atop each report (atpsim.report.answer): the fastest row per case, its margins,
and a paragraph whose counts are the table's."""

import re
from pathlib import Path

import pandas as pd
import pytest

from atpsim.report import findings
from atpsim.report.answer import answer_blocks, answer_sentence, job_cases, step_cases
from atpsim.results.io import read_results

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def _step_rows() -> pd.DataFrame:
    """One machine and model; 8x1 c1 (baseline) 10 s, 4x2 c2 8 s (best), 2x4 c1 9 s, 1x8 c1
    7 s but out of memory, 8x1 c2 analytic 1 s (not simulated)."""
    rows = [("8x1", 8, 1, 1, 10.0, True, "des"), ("4x2", 4, 2, 2, 8.0, True, "des"),
            ("2x4", 2, 4, 1, 9.0, True, "des"), ("1x8", 1, 8, 1, 7.0, False, "des"),
            ("8x1", 8, 1, 2, 1.0, True, "analytic")]  # fmt: skip
    return pd.DataFrame([
        {"topology": "ic3", "hardware": "a100", "model": "M2", "n_devices": 8, "mesh": m,
         "d1": d1, "d2": d2, "chunks": c, "step_time_s": t, "fits_memory": fits, "mode": mode,
         "status": "ok", "point_index": i, "scheme": "atp"}
        for i, (m, d1, d2, c, t, fits, mode) in enumerate(rows)])  # fmt: skip


def test_a_step_case_names_the_fastest_fitting_simulated_row_and_its_margins():
    [case] = step_cases(_step_rows())
    assert case.best == "4x2, 2 chunks" and case.time_s == 8.0 and case.two_d
    assert case.runner_up == "2x4, 1 chunk" and case.over_runner_up == pytest.approx(9 / 8 - 1)
    assert case.over_baseline == pytest.approx(10 / 8 - 1)


def test_the_sentence_counts_the_tables_rows():
    cases = step_cases(_step_rows())
    assert "An ATP 2D mesh (d2 > 1) in 1 of 1 cases" in answer_sentence(cases, "step")
    assert "25.0% faster than Megatron-LM's 1D TP" in answer_sentence(cases, "step")


@pytest.mark.parametrize("name", ["gpt-scale", "joint-network", "llama3", "nvl72"])
def test_a_committed_job_reports_answer_agrees_with_its_key_finding(name):
    """The answer's 'ATP's 2D mesh in n of m cases' is the finding's 'faster in n of m
    comparisons' where every case has both schemes: both count the same rows."""
    frame = read_results(REPORTS / name)
    cases = job_cases(frame)
    finding = findings.job_comparisons(findings.Context(frame, None, "si"))
    text = answer_sentence(cases, "job")
    wins = int(re.search(r"ATP's 2D mesh in (\d+) of (\d+)", text).group(1))
    if finding is not None and all(c.over_baseline is not None for c in cases):
        n, m = map(int, re.search(r"in (\d+) of (\d+) comparisons", finding).groups())
        assert (wins, len(cases)) == (n, m)
    blocks = answer_blocks(frame, "job")
    shown = sum(len(getattr(b, "rows", ())) for b in blocks)
    shown += sum(len(t.rows) for b in blocks for t in getattr(b, "blocks", ()))
    assert shown == len(cases)


def test_no_row_ran_gives_no_answer():
    frame = _step_rows().assign(status="failed")
    assert answer_blocks(frame, "step") == []


def test_the_terminal_lines_give_each_cases_fastest_row_and_margins():
    from atpsim.report.answer import answer_lines

    lines = answer_lines(_step_rows(), "step")
    assert lines[0].startswith("Which DeviceMesh(d1, d2)") and not lines[0].endswith("Per case:")
    assert lines[1] == ("M2 on ic3 (a100), 8 GPUs: 4x2, 2 chunks, 8 s (+12.5% on 2x4, 1 chunk; "
                        "+25.0% on N x 1, 1 chunk)")  # fmt: skip


def test_a_job_with_one_tp_scheme_is_not_counted_as_a_contest():
    from atpsim.report.answer import Case

    alone = [Case("gpt3 on x, 8 GPUs, batch 8", "Megatron-LM 1D 8x1, pp 1, dp 1", 1.0, False,
                  "8x1, pp 1, dp 1, micro-batch 2", 0.05, None)]  # fmt: skip
    text = answer_sentence(alone, "job")
    assert "Only one TP scheme ran (list" in text and "0 of 1" not in text
