"""The link-level engine: flows over directed links at max-min fair rates.

:func:`atpsim.engine.runner.run_collective` is the entry point; :mod:`event` is the plain simpy
simulation, :mod:`vectorized` the exact longest-path sweep, :mod:`partition` the split into
link-disjoint clusters, :mod:`symmetry` the one-flow-per-orbit run of a collective that a rank
shift maps onto itself, :mod:`periodic` the extension of a prefix of alike steps once the run
repeats, :mod:`stepwise` the glue from steps to an event run. Only this package imports simpy.
"""
