"""Helpers for the importer tests: write an input file, import it, read its YAML back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from atpsim.api import import_job, imported_yaml


@pytest.fixture
def write(tmp_path: Path):
    """write(name, text) -> the path of a new file in the test's folder holding *text*."""

    def make(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return make


def imported(kind: str, path: Path, **options):
    """The imported job (unchecked: no topology built) and its scenario as YAML reads it."""
    job = import_job(kind, path, check=False, **options)
    text = imported_yaml(job)
    assert yaml.safe_load(text) == job.scenario()
    return job, yaml.safe_load(text)


def comment_of(text: str, key: str) -> str:
    """The comment beside scenario key *key* (``parallelism.pp``) in the YAML *text*."""
    section, name = key.split(".")
    inside = False
    for line in text.splitlines():
        if line.startswith(f"{section}:"):
            inside = True
        elif inside and line.startswith(f"  {name}:"):
            return line.split("  # ", 1)[1]
        elif inside and not line.startswith(" "):
            inside = False
    raise KeyError(key)
