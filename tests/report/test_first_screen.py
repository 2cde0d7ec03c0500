"""``atpsim report DIR`` takes the page's first screen (first-screen.png, 1280 x 800) where a
Chromium is installed (under CI, .ci/run installs one, so there it must be taken)."""

import os
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.report.screenshot import HEIGHT_PX, WIDTH_PX, find_browser, first_screen

QUICKSTART = Path(__file__).resolve().parents[2] / "reports" / "quickstart"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_atpsim_report_takes_a_1280_by_800_first_screen(tmp_path):
    if find_browser() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium under CI: .ci/run installs Debian's chromium")
        pytest.skip("no Chromium installed")
    folder = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, folder)
    (folder / "first-screen.png").unlink(missing_ok=True)
    result = CliRunner().invoke(main, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    assert str(folder / "first-screen.png") in result.output
    assert _png_size(folder / "first-screen.png") == (WIDTH_PX, HEIGHT_PX)


def test_without_a_browser_nothing_is_taken_and_the_report_stands(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.report.screenshot.find_browser", lambda: None)
    assert first_screen(tmp_path) is None
    assert not (tmp_path / "first-screen.png").exists()
