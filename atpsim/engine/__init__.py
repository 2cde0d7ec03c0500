"""The engine: collectives timed link by link, and training steps scheduled on streams.

Collective level (one call of one collective, every group at once), a pipeline:

- :mod:`collective`: :func:`~atpsim.engine.collective.run_collective`, the entry point
  (checks, memo, the ``auto`` / ``reference`` / ``longest-path`` engines);
- :mod:`reductions`: shrink a problem and expand its answer, each exact:
  :mod:`~reductions.replicate` (identical link-disjoint clusters timed once),
  :mod:`~reductions.symmetry` (one flow per orbit of a rank shift),
  :mod:`~reductions.periodic` (a prefix of a schedule declared as one step repeated, extended);
- :mod:`solvers`: time a problem, tried in order (:mod:`pipeline`):
  :mod:`~solvers.longest_path` (one vectorized pass, exact when no link is shared) and
  :mod:`~solvers.event` (event-driven max-min sharing; :mod:`~solvers.event_loop`,
  :mod:`~solvers.flow_network`, :mod:`~solvers.maxmin`), always exact;
- :mod:`problem` (what a solver is given and gives back), :mod:`result` (the one
  :class:`~atpsim.engine.result.CollectiveResult`, whose ``path`` names the reductions and
  the solver that ran), :mod:`routes` (pairs routed once, as CSR arrays over links).

:mod:`backends`: collective timer backends by name (``event`` = the link-level engine,
``closed-form`` = each algorithm's closed form), one interface for the step level.

Step level (:mod:`step`): :mod:`~step.scheduler` list-schedules a step program on every rank's
compute and communication streams; :mod:`~step.run` chains program, compute times and a
backend's collective times for one point. Only this package imports simpy.
"""
