"""A run or a search writes only over its own results (atpsim.sweep.owner): the same scenario
reruns into its folder, another scenario or the other command is refused without --fresh,
and nothing in the folder changes when it is refused."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.errors import AtpsimError
from atpsim.sweep.owner import check_owner


def finished(folder: Path, copy: str, name: str) -> Path:
    folder.mkdir()
    (folder / "results.csv").write_text("point_index\n0\n")
    (folder / copy).write_text(f"name: {name}\n")
    return folder


@pytest.mark.parametrize("copy, command, name, refused", [
    ("scenario.yaml", "run", "fig12", False),
    ("scenario.yaml", "run", "other", True),
    ("scenario.yaml", "search", "fig12", True),
    ("search.yaml", "search", "search", False),
    ("search.yaml", "run", "search", True),
])
def test_only_the_same_command_and_scenario_reuse_a_folder(tmp_path, copy, command, name, refused):
    out = finished(tmp_path / "out", copy, "fig12" if copy == "scenario.yaml" else "search")
    if refused:
        with pytest.raises(AtpsimError, match="holds the results of") as info:
            check_owner(out, command, name, fresh=False)
        assert info.value.param == "out_dir" and "`fresh=True`" in info.value.message
    else:
        check_owner(out, command, name, fresh=False)
    check_owner(out, command, name, fresh=True)


def test_an_empty_or_unfinished_folder_is_anyones(tmp_path):
    check_owner(tmp_path, "run", "x", fresh=False)
    (tmp_path / "scenario.yaml").write_text("name: y\n")
    check_owner(tmp_path, "run", "x", fresh=False)


def test_the_cli_refuses_in_one_line_and_leaves_the_folder_as_it_was(tmp_path):
    out = finished(tmp_path / "out", "scenario.yaml", "fig12")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("name: tiny\ntopology: ic3\nmodel: M1\nparallelism: {meshes: [atp-1]}\n")
    result = CliRunner().invoke(main, ["run", str(scenario), "-o", str(out), "--no-progress"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "holds the results of run 'fig12'" in result.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
