"""A command runs with the cyclic collector's young threshold raised (atpsim.cli): a job
simulation's millions of long-lived objects were scanned in 10 full passes at CPython's
default of 700 allocations, for no memory back."""

import gc

from click.testing import CliRunner

from atpsim.cli import GC_YOUNG_THRESHOLD, main


def test_a_command_raises_the_young_threshold_and_keeps_the_older_ones():
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        result = CliRunner().invoke(main, ["topo", "--help"])
        assert result.exit_code == 0, result.output
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 10, 10)
        assert gc.isenabled()
    finally:
        gc.set_threshold(*saved)
