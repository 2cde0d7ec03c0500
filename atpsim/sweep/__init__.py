"""Running sweeps: every point of a scenario, in parallel, resumable, failure-isolated."""

from atpsim.sweep.runner import SweepInterrupted, run_sweep, simulate_row

__all__ = ["SweepInterrupted", "run_sweep", "simulate_row"]
