"""The paper's claims in a report (atpsim.report.claims): each check agrees where the rows
say what the claim says and disagrees where they do not; a claim with no rows is "no data";
the scenario rejects an unknown check with its key; Table 3's rank agreement is Kendall's tau
counted by hand; the report states every verdict, and every disagreement of a committed
report says why."""

from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest
import yaml

from atpsim.errors import ScenarioError
from atpsim.report.chunk_table import METRIC as TABLE_METRIC
from atpsim.report.chunk_table import cells
from atpsim.report.claims import CHECKS, rank_agreement, verdicts
from atpsim.results.io import read_results
from atpsim.scenario.loader import load_report_sections
from atpsim.scenario.report import CLAIM_CHECKS, Reference

REPORTS = Path(__file__).resolve().parents[2] / "reports"
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def row(topology, model, mesh, tflops, *, chunks=1, scheme="atp", devices=8, delta=None):
    d1, d2 = (int(x) for x in mesh.split("x")[:2])
    return {"status": "ok", "mode": "des", "topology": topology, "model": model, "mesh": mesh,
            "d1": d1, "d2": d2, "chunks": chunks, "scheme": scheme, "n_devices": devices,
            "tflops_per_gpu": tflops, "comm_over_delta": delta}


FRAME = pd.DataFrame([
    # ic1: Megatron 8x1 at 10 and 20; ATP's 2x4 at 15 and 28, with 2 chunks at 15.3 and 28.28
    # (+2%, +1% over chunks 1; ATP's best is +53%, +41% over Megatron); SUMMA at 20 and 21
    # (ATP, at 0.77 and 1.35 of it, loses for M1 and wins for M2)
    row("ic1", "M1", "8x1", 10.0), row("ic1", "M1", "2x4", 15.0),
    row("ic1", "M1", "2x4", 15.3, chunks=2), row("ic1", "M1", "2x2x2", 20.0, scheme="summa"),
    row("ic1", "M2", "8x1", 20.0), row("ic1", "M2", "2x4", 28.0),
    row("ic1", "M2", "2x4", 28.28, chunks=2), row("ic1", "M2", "2x2x2", 21.0, scheme="summa"),
    # ic5: ATP-1 grows from 16 to 64 devices, ATP-2 shrinks
    row("ic5", "M4", "16x1", 1.0, devices=16, delta=3.0),
    row("ic5", "M4", "64x1", 1.0, devices=64, delta=4.0),
    row("ic5", "M4", "8x2", 1.0, devices=16, delta=2.5),
    row("ic5", "M4", "32x2", 1.0, devices=64, delta=2.0),
])


def claim(check, **kw):
    return {"text": check, "check": check, "topology": kw.pop("topology", "ic1"), **kw}


@pytest.mark.parametrize("claimed, shown, agrees", [
    (claim("best_mesh", mesh="2x4"), "M1 2x4, M2 2x4", True),
    (claim("best_mesh", mesh="8x1"), "M1 2x4, M2 2x4", False),
    (claim("atp_gain", low=0.37, high=0.64), "+41% to +53%", True),
    (claim("atp_gain", high=0.45), "+41% to +53%", False),
    (claim("atp_gain", models=["M2"], low=0.4), "+41%", True),
    (claim("atp_beats_summa", except_models=["M1"]), "ATP / SUMMA: M1 0.77, M2 1.35", True),
    (claim("atp_beats_summa"), "ATP / SUMMA: M1 0.77, M2 1.35", False),
    (claim("summa_below_megatron"), "SUMMA at 1.05-2.00 of Megatron-LM", False),
    (claim("summa_advantage_shrinks"), "SUMMA / Megatron-LM: 2.00, 1.05", False),
    (claim("chunk_gain", chunks=2, low=0.01, high=0.03), "+1% to +2%", True),
    (claim("chunk_gain", chunks=2, low=0.015), "+1% to +2%", False),
    (claim("comm_trend", topology="ic5", atp=1, trend="up"), "3.00 -> 4.00 Delta", True),
    (claim("comm_trend", topology="ic5", atp=2, trend="up"), "2.50 -> 2.00 Delta", False),
])
def test_each_check_agrees_only_with_what_the_rows_show(claimed, shown, agrees):
    (verdict,) = verdicts(FRAME, Reference(claims=[claimed]))
    assert (verdict.shown, verdict.agrees) == (shown, agrees)


def test_summa_that_falls_below_megatron_agrees():
    frame = FRAME.assign(tflops_per_gpu=FRAME["tflops_per_gpu"].where(
        FRAME["scheme"] != "summa", [5.0 if m == "M1" else 4.0 for m in FRAME["model"]]))
    checked = verdicts(frame, Reference(claims=[claim("summa_below_megatron"),
                                                claim("summa_advantage_shrinks")]))
    assert [v.agrees for v in checked] == [True, True]


def test_a_claim_without_rows_has_no_verdict_and_every_check_is_registered():
    (verdict,) = verdicts(FRAME, Reference(claims=[claim("best_mesh", topology="ic9", mesh="2x4")]))
    assert (verdict.shown, verdict.agrees) == ("no simulated rows", None)
    assert set(CHECKS) == set(CLAIM_CHECKS)


def test_an_unknown_check_names_its_key():
    text = "name: t\nreference:\n  claims:\n    - {text: a, check: best_mash, topology: ic1}\n"
    with pytest.raises(ScenarioError) as raised:
        load_report_sections(text, "s.yaml")
    assert raised.value.key == "reference.claims[0].check"
    assert "did you mean 'best_mesh'" in raised.value.message


def _tau_by_hand(xs, ys):
    pairs = list(combinations(range(len(xs)), 2))
    sign = [((xs[i] > xs[j]) - (xs[i] < xs[j])) * ((ys[i] > ys[j]) - (ys[i] < ys[j]))
            for i, j in pairs]
    return sum(sign) / len(pairs)


def test_table3_rank_agreement_is_kendalls_tau_of_each_interconnect():
    """Tau-a counted pair by pair (the committed cells have no ties, so it equals scipy's
    tau-b), on the committed Table 3 results and the paper's cells."""
    folder = REPORTS / "table3"
    frame = read_results(folder / "results.csv")
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    reference = Reference(table3=scenario["reference"]["table3"])
    simulated = {(str(c.model), str(c.topology).lower(), int(c.chunks)): getattr(c, TABLE_METRIC)
                 for c in cells(frame, "des").itertuples()}
    taus = rank_agreement(frame, reference)
    assert sorted(taus) == ["ic1", "ic2", "ic3", "ic4"]
    for topology, tau in taus.items():
        keys = [k for k in reference.cells() if k[1] == topology]
        assert tau == pytest.approx(_tau_by_hand([reference.cells()[k] for k in keys],
                                                 [simulated[k] for k in keys]))


def test_the_committed_reports_state_their_verdicts():
    for name, claims in (("fig10", 9), ("fig11", 4), ("fig12", 6), ("table3", 4)):
        text = (REPORTS / name / "report.md").read_text()
        assert "## Against the paper" in text
        assert f" of {claims} agree" in text


PAPER_REPORTS = ("fig10", "fig11", "fig12", "table3")


def _committed_reference(name):
    scenario = SCENARIOS / f"{name}.yaml"
    reference = load_report_sections(scenario.read_text(), str(scenario)).reference
    copy = REPORTS / name / "scenario.yaml"
    assert load_report_sections(copy.read_text(), str(copy)).reference == reference, (
        f"reports/{name}/scenario.yaml's claims differ from scenarios/{name}.yaml's")
    return reference


@pytest.mark.parametrize("name", PAPER_REPORTS)
def test_every_disagreement_of_a_committed_report_says_why_and_the_report_shows_it(name):
    """Each claim that the committed results contradict carries the *why* a sensitivity run
    found (a future disagreement must be explained too), and the report prints every why
    in the claims table's "why (tested)" column, on the claim's own row."""
    reference = _committed_reference(name)
    checked = verdicts(read_results(REPORTS / name / "results.csv"), reference)
    unexplained = [v.claim.text for v in checked if v.agrees is False and not v.claim.why]
    assert unexplained == [], f"{name}: disagreements without a why: {unexplained}"
    report = (REPORTS / name / "report.md").read_text()
    assert "| the paper says | simulated | agrees | why (tested) |" in report
    for v in checked:
        if v.claim.why:
            assert f"| {v.claim.text} | {v.shown} | {'**no**' if v.agrees is False else 'yes'} " \
                   f"| {v.claim.why} |" in report


def test_a_why_is_optional_and_text():
    assert Reference(claims=[claim("best_mesh", mesh="2x4")]).claims[0].why is None
    text = "name: t\nreference:\n  claims:\n    - {text: a, check: best_mesh, topology: ic1, why: 3}\n"
    with pytest.raises(ScenarioError) as raised:
        load_report_sections(text, "s.yaml")
    assert raised.value.key == "reference.claims[0].why"
