"""Reports across run folders: :func:`build_index` writes the index page of a folder of
reports (:mod:`atpsim.report.index`); one report is rebuilt by
:func:`atpsim.api.scenario.rebuild_report`, and :func:`first_screen` takes its first screen
(``first-screen.png``, 1280 x 800) where a Chromium is installed."""

from __future__ import annotations

from atpsim.report.index import build_index
from atpsim.report.screenshot import first_screen

__all__ = ["build_index", "first_screen"]
