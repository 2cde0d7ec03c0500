"""The workload: a training job (a model, its DP x PP x TP layout, how its step is cut), its
programs and calls, and one iteration of it simulated on the engine's network.

Modules, lowest first: :mod:`~atpsim.training.config` (what a job is),
:mod:`~atpsim.training.passes` (its TP pass programs and their costs),
:mod:`~atpsim.training.calls` (its collective calls), :mod:`~atpsim.training.perturb`
(stragglers and slow cables drawn for it), :mod:`~atpsim.training.job` (one iteration,
:func:`~atpsim.training.job.simulate_job`), :mod:`~atpsim.training.links` (what crossed each
link), :mod:`~atpsim.training.fabric` (jobs sharing a fabric), :mod:`~atpsim.training.layouts`
(every layout of a machine, pruned and ranked: ``plan_job``) and :mod:`~atpsim.training.plain`
(the plain run beside the shortcuts). It sits above the engine and calibration and below
results, scenarios and reports: it writes no files (:mod:`atpsim.api` does).
"""
