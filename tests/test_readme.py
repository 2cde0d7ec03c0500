"""The README's promises: two quick-start commands, the same test command in .ci/run, and a
scenario example that validates."""

import re
from pathlib import Path

from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_quick_start_is_exactly_two_commands_and_ci_runs_the_second():
    block = re.search(r"```\n(.*?)```", _section("Quick start"), re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert "atpsim run scenarios/quickstart.yaml" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_the_scenario_sketch_validates(tmp_path):
    sketch = re.search(r"```yaml\n(.*?)```", _section("Writing a scenario"), re.S).group(1)
    path = tmp_path / "my-cluster.yaml"
    path.write_text(sketch)
    assert len(expand_sweep(load_scenario(path))) == 2 * 2 * 3 * 3 * 2 * 7  # 7 meshes of 64


def test_the_table_3_rows_are_the_committed_reports():
    """The README quotes reports/table3/report.md; the report is held to a new simulation by
    tests/scenarios/test_committed_results_are_current.py."""
    report = (ROOT / "reports" / "table3" / "report.md").read_text()
    rows = [
        line
        for line in _section("Results against the paper").splitlines()
        if line.startswith("| M")
    ]
    assert len(rows) == 9
    assert all(row in report for row in rows)


def test_the_python_api_example_runs(tmp_path, monkeypatch, capsys):
    """The README's Python block runs as written (the scenario path made absolute, its run
    folder under tmp_path)."""
    block = re.search(r"```python\n(.*?)```", _section("Python API"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(block.replace('"scenarios/', f'"{ROOT}/scenarios/'), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 5
    assert printed[2].startswith("DeviceMesh(2, 4) agrees with Eq. 2: True")
    assert "bubble" in printed[3]
    assert (tmp_path / "my-run" / "results.csv").exists()
