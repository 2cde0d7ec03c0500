"""A report's first screen as a reader sees it: ``first-screen.png`` beside ``report.html``,
taken by headless Chromium in a 1280 x 800 window (a laptop's browser), so a reviewer can
check at a glance that the page answers its question above the fold (the answer section,
:mod:`atpsim.report.answer`). Taken by ``atpsim report`` where a Chromium is installed
(Debian's ``chromium``, ``chromium-browser``, ``google-chrome``); elsewhere nothing is taken
and the command says so. Pixels differ between browser builds, so the file is refreshed, not
compared byte for byte."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

#: The browsers tried, in order.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The window: 1280 x 800 px.
WIDTH_PX, HEIGHT_PX = 1280, 800
FILE = "first-screen.png"
#: Seconds a screenshot may take before it is given up.
TIMEOUT_S = 60


def find_browser() -> str | None:
    """The first installed browser of :data:`BROWSERS` (None: none)."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def first_screen(report_dir: Path) -> Path | None:
    """Write ``report_dir/first-screen.png`` from ``report_dir/report.html``; None where no
    browser is installed, the page is missing or the browser fails (the report stands
    without it)."""
    browser, page = find_browser(), report_dir / "report.html"
    if browser is None or not page.is_file():
        return None
    target = report_dir / FILE
    with tempfile.TemporaryDirectory() as profile:
        command = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--disable-extensions", "--no-first-run", f"--user-data-dir={profile}",
            f"--window-size={WIDTH_PX},{HEIGHT_PX}", f"--screenshot={target.resolve()}",
            "--virtual-time-budget=5000", page.resolve().as_uri(),
        ]  # fmt: skip
        try:
            subprocess.run(command, capture_output=True, timeout=TIMEOUT_S, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
    return target if target.is_file() else None
