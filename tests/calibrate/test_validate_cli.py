"""`atpsim validate`: the loop on the synthetic folder, a failing folder, an nccl-tests log."""

from pathlib import Path

from calibrate_fakes import write_folder
from click.testing import CliRunner

from atpsim.cli import main

AZURE_LOG = Path(__file__).parent / "data" / "azure_nd_a100_v4_all_reduce_perf.log"


def run(*args):
    return CliRunner().invoke(main, ["validate", *map(str, args)])


def test_synthetic_folder_passes_and_saves_the_report(synthetic_folder):
    result = run(synthetic_folder)
    assert result.exit_code == 0, result.output
    assert "link fit (ring, 4 ranks): 2 GB/s, 20 us per transfer" in result.output
    assert "(2,2) c2 h64 b4 s16" in result.output and "PASS: median |error|" in result.output
    for suffix in ("csv", "md", "png"):
        assert (synthetic_folder / f"validation_report.{suffix}").is_file()
    rows = (synthetic_folder / "validation_report.csv").read_text().splitlines()
    assert len(rows) == 1 + 6 and rows[0].startswith("label,d1,d2,chunks")
    second = run(synthetic_folder)  # reuses fitted/ without refitting
    assert second.exit_code == 0 and "link fit" not in second.output


def test_layers_off_by_half_fail_with_exit_1(tmp_path):
    folder = write_folder(tmp_path / "slow", layer_scale=1.5)
    result = run(folder)
    assert result.exit_code == 1, result.output
    assert "FAIL: median |error| 33" in result.output


def test_fit_only_writes_fitted_and_no_report(synthetic_folder):
    result = run(synthetic_folder, "--fit-only")
    assert result.exit_code == 0, result.output
    assert (synthetic_folder / "fitted" / "hardware.yaml").is_file()
    assert not (synthetic_folder / "validation_report.csv").exists()


def test_a_log_file_prints_its_link():
    result = run(AZURE_LOG)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # independent of terminal width and path length
    assert "8 ranks" in text and "bandwidth 228." in text
    assert "largest-message busbw 231.58 GB/s" in text


def test_missing_tolerance_is_a_clean_error(synthetic_folder):
    (synthetic_folder / "tolerance.yaml").unlink()
    result = run(synthetic_folder)
    assert result.exit_code == 2
    assert "no tolerance.yaml" in result.output
