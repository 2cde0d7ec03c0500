"""Where a report's numbers come from: the results file (its SHA-256 and row count), the
atpsim version that built the page, and the date its results were first reported.

The date must not make a rebuilt report differ from the committed one (``atpsim report DIR``
rebuilds it byte for byte), so it is not read from the clock at every build. The first time
a report is built for a given results.csv (compared by SHA-256), :func:`provenance` records
the day (UTC) and the atpsim version in ``provenance.json`` beside it; later builds of the
same results read that record. New results (a rerun that changes a number, resumed rows) get
a new record. ``atpsim run`` builds the report right after the sweep, so the date is the
run's. ``SOURCE_DATE_EPOCH`` (seconds since 1970, the reproducible-builds convention,
https://reproducible-builds.org/specs/source-date-epoch/) gives the date to record instead
of today's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from atpsim.errors import source_date_epoch

RECORD = "provenance.json"
RESULTS = "results.csv"


@dataclass(frozen=True)
class Provenance:
    """*version*: the atpsim that builds the page; *sha256*: of results.csv (None where the
    folder has none); *rows*: rows of the table reported; *date* (YYYY-MM-DD, UTC) and
    *first_version*: when and by which atpsim these results were first reported."""

    version: str
    sha256: str | None
    rows: int
    date: str | None = None
    first_version: str | None = None


def atpsim_version() -> str:
    """The installed atpsim's version ("unknown" when run from a tree that is not installed)."""
    try:
        return metadata.version("atpsim")
    except metadata.PackageNotFoundError:
        return "unknown"


def _today() -> str:
    epoch = source_date_epoch()
    moment = datetime.fromtimestamp(epoch, UTC) if epoch is not None else datetime.now(UTC)
    return moment.strftime("%Y-%m-%d")


def provenance(out_dir: Path, rows: int) -> tuple[Provenance, Path | None]:
    """The provenance of the report in *out_dir* (of a table of *rows* rows), recording the
    date of new results first (see the module docstring); also the record file when this
    call wrote it (None when the record was there or there is no results.csv)."""
    found = recorded(out_dir, rows)
    if found.sha256 is None or found.date is not None:
        return found, None
    record = {"results_sha256": found.sha256, "date": _today(), "atpsim": found.version}
    path = out_dir / RECORD
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return recorded(out_dir, rows), path


def recorded(out_dir: Path, rows: int) -> Provenance:
    """The provenance of the report in *out_dir* as recorded, writing nothing: no date where
    the record is missing or belongs to other results."""
    version = atpsim_version()
    results = out_dir / RESULTS
    if not results.is_file():
        return Provenance(version, None, rows)
    sha = hashlib.sha256(results.read_bytes()).hexdigest()
    record = _read(out_dir / RECORD)
    if record.get("results_sha256") != sha:
        return Provenance(version, sha, rows)
    return Provenance(version, sha, rows, str(record.get("date")), str(record.get("atpsim")))


def _read(path: Path) -> dict[str, object]:
    """The record at *path*; empty when missing or unreadable (it is then written anew)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def sentence(prov: Provenance, folder: str = "") -> str:
    """One line on where a page's numbers come from: the atpsim that built it, the date the
    results were first reported, the results file and the scenario (linked relative to the
    page; *folder*: the report folder's path from the page, with a trailing slash)."""
    parts = [f"Built by atpsim {prov.version}"]
    if prov.date:
        by = f" by atpsim {prov.first_version}" if prov.first_version != prov.version else ""
        parts.append(f"results first reported {prov.date}{by}")
    if prov.sha256:
        link = f"[results.csv]({folder}results.csv)"
        parts.append(f"{link} ({prov.rows} rows, SHA-256 {prov.sha256[:12]})")
    parts.append(f"[scenario.yaml]({folder}scenario.yaml)")
    return " · ".join(parts)
