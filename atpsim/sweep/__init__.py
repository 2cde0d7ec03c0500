"""Running sweeps: every point of a scenario, in parallel, resumable, failure-isolated, the
rows streamed to disk (:func:`stream_sweep`; :func:`run_sweep` reads the table back)."""

from atpsim.sweep.rows import simulate_row
from atpsim.sweep.runner import SweepInterrupted, run_sweep, stream_sweep

__all__ = ["SweepInterrupted", "run_sweep", "simulate_row", "stream_sweep"]
