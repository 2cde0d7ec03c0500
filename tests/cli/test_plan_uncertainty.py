"""`atpsim plan --uncertainty N` and `atpsim collective --uncertainty N` as a user reads them:
intervals per candidate, how sure the best is, and one clear line for a request that cannot be
met (issue 14, parts 1 and 2)."""

from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner

import atpsim.api as api
from atpsim.cli import main
from atpsim.compute.hardware import load_profile, profile_to_dict

ARGS = ["plan", "-t", "torus:2x2", "-m", "M1", "--chunks", "1,2"]


def _body(stdout: str) -> list[list[str]]:
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
        if len(cells) >= 10:
            rows.append(cells)
    return rows


@pytest.fixture(scope="module")
def drawn() -> str:
    result = CliRunner().invoke(main, [*ARGS, "--uncertainty", "4", "--seed", "2"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_each_candidate_prints_its_interval_and_share_of_wins(drawn):
    rows = _body(drawn)
    assert rows[0][3:7] == ["step ms", "p10-p90 ms", "p50 ms", "P(best)"]
    ranked = api.plan("torus:2x2", "M1", chunks=(1, 2), uncertainty=4, seed=2)
    for row, entry, share in zip(rows[1:], ranked.entries, ranked.confidence.p_best_by_candidate,
                                 strict=True):  # fmt: skip
        step = entry.draws.step_interval
        low, high = (float(x) for x in row[4].split("-"))
        assert low == pytest.approx(step.p10 * 1e3, abs=0.006)
        assert high == pytest.approx(step.p90 * 1e3, abs=0.006)
        assert float(row[5]) == pytest.approx(step.p50 * 1e3, abs=0.006)
        assert float(row[6]) == pytest.approx(share, abs=0.006)
        assert low <= float(row[5]) <= high


def test_the_best_is_stated_with_its_probability_and_expected_loss(drawn):
    text = " ".join(drawn.split())
    found = re.search(r"Under 4 draws of the fitted parameters \(gemm:a100-sxm4-80gb; seed 2\), "
                      r"DeviceMesh\((\d+), (\d+)\) with chunks=(\d) is the fastest in (\d) of 4 "
                      r"\(P = ([\d.]+)\); choosing it costs ([\d.]+)% of step time", text)  # fmt: skip
    assert found, text
    ranked = api.plan("torus:2x2", "M1", chunks=(1, 2), uncertainty=4, seed=2)
    best = ranked.des_choice
    assert (int(found[1]), int(found[2]), int(found[3])) == (best.mesh.d1, best.mesh.d2, best.chunks)
    assert float(found[5]) == pytest.approx(ranked.confidence.p_best, abs=0.005)


def test_without_draws_nothing_of_them_is_printed():
    result = CliRunner().invoke(main, ARGS)
    assert result.exit_code == 0
    assert "p10" not in result.stdout and "draws" not in result.stdout
    assert _body(result.stdout)[0][3:5] == ["step ms", "compute ms"]


@pytest.mark.parametrize("value", ["0", "-3", "1000000"])
def test_a_bad_number_of_draws_is_one_line_exit_2(value):
    result = CliRunner().invoke(main, [*ARGS, "--uncertainty", value])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--uncertainty" in result.stderr
    assert "Traceback" not in result.output


def test_draws_of_nothing_fitted_are_refused_in_one_line(tmp_path):
    """A custom profile file (no fit behind it) on a torus (spec links, no NCCL): every draw
    would be the point estimate, so the request is refused rather than shown as certainty."""
    profile = tmp_path / "custom.yaml"
    profile.write_text(yaml.safe_dump({**profile_to_dict(load_profile("a100-sxm4-80gb")),
                                       "name": "custom"}))  # fmt: skip
    result = CliRunner().invoke(main, [*ARGS, "--hardware", str(profile), "--uncertainty", "4"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "no fitted parameter" in result.stderr


def test_collective_prints_percentiles_per_size_and_keeps_its_json_without_draws():
    args = ["collective", "-t", "dgx-a100", "--bytes", "1M:4M"]
    drawn = CliRunner().invoke(main, [*args, "--uncertainty", "3", "--csv"])
    assert drawn.exit_code == 0, drawn.output
    header, *rows = drawn.stdout.splitlines()
    assert header.endswith("busbw_GBps_p10,busbw_GBps_p50,busbw_GBps_p90") and len(rows) == 3
    for row in rows:
        cells = row.split(",")
        assert float(cells[-3]) <= float(cells[-2]) <= float(cells[-1])
    plain = CliRunner().invoke(main, [*args, "--json"])
    assert plain.exit_code == 0 and '"uncertainty"' not in plain.stdout
    refused = CliRunner().invoke(main, ["collective", "-t", "torus:2x2", "--uncertainty", "2"])
    assert refused.exit_code == 2 and "no fitted parameter" in refused.stderr


@pytest.mark.slow
def test_the_issue_example_ic1_m2_32_draws():
    """`atpsim plan --topology ic1 --model M2 --uncertainty 32` (about 10-20 s): intervals and
    the probability that DeviceMesh(2, 4) is best, from the paper fit's covariance."""
    result = CliRunner().invoke(main, ["plan", "--topology", "ic1", "--model", "M2",
                                       "--uncertainty", "32"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "p10-p90 ms" in text
    assert re.search(r"\(paper-fit; seed 0\), DeviceMesh\(2, 4\) with chunks=1 is the fastest in "
                     r"\d+ of 32 \(P = 0\.\d\d\)", text)  # fmt: skip
