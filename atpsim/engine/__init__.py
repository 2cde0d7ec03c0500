"""The link-level engine: flows over directed links at max-min fair rates.

:func:`atpsim.engine.runner.run_collective` is the entry point; :mod:`event` is the plain simpy
simulation, :mod:`vectorized` the exact longest-path sweep, :mod:`partition` the split into
link-disjoint clusters. Only this package imports simpy.
"""
