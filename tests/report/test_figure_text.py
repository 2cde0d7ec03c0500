"""Every committed figure's text reads at 10 px or more in a 1280 px window (issue 26): the
figure box is the page body's 72 rem (1152 px), a PNG wider than that is shrunk into it, so a
figure's smallest font (SVG units are points) times its shrink must reach 10 px."""

import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from atpsim.report.panels import BOX_PX, MIN_TEXT_PX, PNG_DPI, legible, min_font_pt

REPORTS = Path(__file__).resolve().parents[2] / "reports"
FIGURES = sorted(REPORTS.glob("*/figures/*.svg"))


def rendered_min_text_px(svg: Path) -> float:
    text = svg.read_text()
    width_pt = float(re.search(r'<svg[^>]*width="([\d.]+)pt"', text).group(1))
    sizes = [float(s) for s in re.findall(r"font[^;\"]*?([\d.]+)px", text)]
    shown_px = min(BOX_PX, width_pt / 72 * PNG_DPI)
    return min(sizes) * shown_px / width_pt


@pytest.mark.parametrize("svg", FIGURES, ids=[f"{p.parts[-3]}/{p.name}" for p in FIGURES])
def test_committed_figure_text_is_at_least_10_px_at_1280(svg):
    assert rendered_min_text_px(svg) >= MIN_TEXT_PX - 0.05


def test_the_floor_grows_with_a_figure_wider_than_the_box():
    assert min_font_pt(5.0) == pytest.approx(10 * 72 / 110)  # drawn at full size: 6.55 pt
    assert min_font_pt(2 * BOX_PX / PNG_DPI) == pytest.approx(2 * 10 * 72 / 110)


def test_legible_raises_small_text_and_keeps_large():
    figure = Figure(figsize=(20, 4))  # 2200 px: shrunk to 1152, a 12.5 pt floor
    ax = figure.add_subplot()
    small, large = ax.text(0, 0, "small", fontsize=6), ax.set_title("large", fontsize=20)
    legible(figure)
    assert small.get_fontsize() == pytest.approx(min_font_pt(20)) and large.get_fontsize() == 20
