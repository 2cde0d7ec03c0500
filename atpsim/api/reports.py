"""Reports across run folders: :func:`build_index` writes the index page of a folder of
reports (:mod:`atpsim.report.index`); one report is rebuilt by
:func:`atpsim.api.scenario.rebuild_report`."""

from __future__ import annotations

from atpsim.report.index import build_index

__all__ = ["build_index"]
