"""Each committed report, and the index of reports, as a real browser lays it out: headless
Chromium opens every ``reports/*/report.html`` and ``reports/index.html`` at 1280 and 420 px
wide, with every folded section opened, and nothing may stick out of the page sideways (a
wide table scrolls inside its own box instead); at 1280 x 800 each report's answer table
starts on the first screen.

Skipped where no Chromium is installed, except under CI (``CI`` set), where ``.ci/run``
installs Debian's ``chromium`` and a missing browser fails. One browser process lays out every page at once (each copy in
an iframe of the width under test, reporting its measures to the wrapper page by
postMessage), which keeps the test to a few seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTHS = (1280, 420)
HEIGHT = 900
#: The first screen: a 1280 x 800 window.
FIRST_SCREEN_PX = 800

#: Injected into each page copy: open every <details>, then report the page's scroll and
#: client widths, its height, and the first elements whose right edge passes the page's
#: (those inside a box that scrolls or clips sideways do not count).
MEASURE = """<script>
addEventListener('load', function () {
  var answer = -1;
  document.querySelectorAll('h2').forEach(function (h) {
    if (answer >= 0 || h.textContent.trim() !== 'Answer') return;
    for (var e = h.nextElementSibling; e; e = e.nextElementSibling) {
      var t = e.tagName === 'TABLE' ? e : e.querySelector('table');
      if (t) { answer = t.getBoundingClientRect().top; break; }
    }
  });
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var doc = document.documentElement, wide = [];
  function boxed(e) {
    for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  }
  document.querySelectorAll('body *').forEach(function (e) {
    if (wide.length < 5 && e.getBoundingClientRect().right > doc.clientWidth + 0.5 && !boxed(e))
      wide.push(e.tagName + ' ' + (e.textContent || '').slice(0, 60));
  });
  parent.postMessage(JSON.stringify({page: document.body.dataset.page,
    scroll: doc.scrollWidth, client: doc.clientWidth, wide: wide, answer: answer}), '*');
});
</script>"""

#: The page that holds every iframe; it listens before the first iframe can report.
WRAPPER = """<!DOCTYPE html><html><body style="margin:0"><pre id="out"></pre>
<script>var got = [];
addEventListener('message', function (e) {{
  got.push(JSON.parse(e.data));
  document.getElementById('out').textContent = JSON.stringify(got);
}});</script>
{frames}
</body></html>"""


def _browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _pages() -> list[Path]:
    pages = sorted(REPORTS.glob("*/report.html"))
    return pages + ([REPORTS / "index.html"] if (REPORTS / "index.html").is_file() else [])


def _label(page: Path) -> str:
    return page.parent.name if page.name == "report.html" else page.stem


def _layout(browser: str, pages: list[Path], work: Path) -> list[dict]:
    """Lay out every page at every width in one Chromium run; the measures of each."""
    frames = []
    for page in pages:
        for width in WIDTHS:
            name = f"{_label(page)}-{width}"
            text = page.read_text(encoding="utf-8").replace(
                "<body>", f'<body data-page="{name}">', 1)  # fmt: skip
            (work / f"{name}.html").write_text(text.replace("</body>", MEASURE + "</body>"))
            frames.append(f'<iframe src="{name}.html" style="display:block;border:0;'
                          f'width:{width}px;height:{HEIGHT}px"></iframe>')  # fmt: skip
    wrapper = work / "wrapper.html"
    wrapper.write_text(WRAPPER.format(frames="\n".join(frames)))
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={work / 'profile'}", "--window-size=1500,900",
        "--virtual-time-budget=20000", "--dump-dom", wrapper.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="out">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no measures from {browser}: {done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.fixture(scope="module")
def browser() -> str:
    found = _browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium under CI: .ci/run installs Debian's chromium")
        pytest.skip("no Chromium installed (apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def measures(browser, tmp_path_factory) -> list[dict]:
    return _layout(browser, _pages(), tmp_path_factory.mktemp("browser"))


def test_no_report_overflows_the_page_at_1280_or_420_px(measures):
    pages = _pages()
    assert pages, "no committed reports"
    assert sorted(m["page"] for m in measures) == sorted(
        f"{_label(p)}-{w}" for p in pages for w in WIDTHS
    )
    wide = [m for m in measures if m["scroll"] > m["client"] or m["wide"]]
    assert not wide, wide


def test_each_reports_answer_table_starts_on_the_first_screen_at_1280_px(measures):
    """The answer (atpsim.report.answer) is above the fold of a 1280 x 800 window."""
    at_1280 = {m["page"]: m["answer"] for m in measures if m["page"].endswith("-1280")}
    reports = [p for p in _pages() if p.name == "report.html"]
    placed = {_label(p): at_1280[f"{_label(p)}-1280"] for p in reports}
    late = {name: top for name, top in placed.items() if not 0 <= top < FIRST_SCREEN_PX}
    assert not late, late
