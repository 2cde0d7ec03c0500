"""The reference engine's memory budget (atpsim.engine.budget): flows counted from the
pattern alone, equal to what the run simulates; a run over the limit is refused before
anything is built, naming the engine parameter (one line naming --engine on the command line)."""

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.engine.budget import BYTES_PER_REFERENCE_FLOW, reference_flows
from atpsim.engine.collective import run_collective
from atpsim.errors import AtpsimError
from atpsim.topology.spec import load_topology


@pytest.mark.parametrize("op, algorithm, groups", [
    ("all_reduce", "ring", [list(range(8))]),
    ("all_reduce", "rabenseifner", [[0, 1, 2, 3, 4], [5, 6, 7]]),
    ("all_gather", "ring", [[0, 1], [2, 3], [4, 5, 6]]),
    ("all_to_all", "pairwise", [list(range(6))]),
])
def test_the_count_is_what_the_reference_run_simulates(op, algorithm, groups):
    topology = load_topology("torus:2x4")
    result = run_collective(topology, op, algorithm, groups, 2**20, engine="reference")
    assert reference_flows(op, algorithm, groups, 2**20) == result.n_flows > 0


def test_a_run_over_the_limit_is_refused_before_it_starts():
    """A ring on 64 GPUs is 2 x 63 x 64 = 8064 flows; a limit below their estimate refuses it."""
    with pytest.raises(AtpsimError, match="8,064 flows") as info:
        run_collective(load_topology("torus:8x8"), "all_reduce", "ring", [list(range(64))],
                       2**20, engine="reference", memory_bytes=8064 * BYTES_PER_REFERENCE_FLOW - 1)
    assert info.value.param == "engine" and "use `engine='auto'`" in info.value.message
    run_collective(load_topology("torus:8x8"), "all_reduce", "ring", [list(range(64))],
                   2**20, engine="reference", memory_bytes=8064 * BYTES_PER_REFERENCE_FLOW)


def test_the_cli_says_so_in_one_line(monkeypatch):
    """The limit is patched, not set in ATPSIM_MAX_MEMORY: the command would lower this very
    test process's data limit to it (atpsim.commands._common.cap_memory)."""
    monkeypatch.setattr("atpsim.commands.collective.memory_cap", lambda: 2**28)
    result = CliRunner().invoke(main, ["collective", "-t", "torus:32x32", "--engine", "reference",
                                       "--bytes", "1G", "--protocol", "none", "-a", "ring"])
    assert result.exit_code == 2
    assert result.output.startswith("atpsim: error: --engine: the plain reference run of "
                                    "all_reduce by ring is 2,095,104 flows")
    assert "; use --engine auto (the same answer through exact shortcuts) or raise " \
        "ATPSIM_MAX_MEMORY (bytes)" in result.output
    assert len(result.output.strip().splitlines()) == 1
