"""The engine: bytes moved over links as flows at max-min fair rates, and the task graphs
that issue them.

Where the house goes, stage by stage (README, "How it works"): a scenario becomes workload
points (:mod:`atpsim.scenario`, :mod:`atpsim.training`, :mod:`atpsim.parallel`); each point is
programs of compute delays and collective calls; this package times them; the answers become
results rows (:mod:`atpsim.results`) and reports (:mod:`atpsim.report`). Inside the engine:

**One flow network** (:mod:`solvers`): :mod:`~solvers.flow_network` holds flows over directed
links at weighted max-min fair rates (:mod:`~solvers.maxmin`: one progressive-filling
family, whose unit-weight case is plain max-min; a weight is a protocol's wire bytes per
byte), with release times, per-link bytes and busy time. Two implementations of its event
loop sit behind :func:`~solvers.event_loop.run_flows`: the reference loop
(:mod:`~solvers.flow_loop`, numpy) and the compiled kernel (:mod:`~solvers.flow_kernel`,
numba) for large runs. The loop's :data:`~solvers.flow_loop.COLLECTIVE` and
:data:`~solvers.flow_loop.JOINT` rules say how it batches events at one instant, the one
place where the two callers below still differ.

**How a point is simulated** is named in one registry, :mod:`methods`: a method per name a
user types (a collective's ``engine``, a step's collective ``backend``, a job's ``network`` and
pass ``granularity``, a point's ``mode``), each saying its kind (the plain run, exact
shortcuts, each call alone, closed form, analytic model), its level, whether it is exact
against the plain run, and what the code dispatches on; the entry points below look names up
there and keep no table of their own.

**One collective** (one call, every group at once): :func:`collective.run_collective`
checks the request, memoizes it, and runs the ``engine`` method it names:

- ``reference``: every flow in one run of the flow network (:func:`pipeline.solve_reference`);
- ``auto``: exact reductions in front of the same network, each tested against the
  reference run: :mod:`~reductions.replicate` (identical link-disjoint clusters once; the
  split it shares with the joint network's parts is :mod:`~reductions.components`),
  :mod:`~reductions.symmetry` (one flow per orbit of a rank shift), :mod:`~reductions.mirror`
  (one flow per orbit of a reflection: NCCL's double binary tree), then the solvers of
  :data:`methods.SOLVERS`: :mod:`~solvers.longest_path` (one vectorized pass, exact when no
  link carries two flows at once) or :mod:`~reductions.periodic` + :mod:`~solvers.event`
  (the network on a prefix of a schedule declared as one step repeated, extended).

:mod:`nccl` times a call as NCCL runs it: the candidates planned by
:mod:`atpsim.collectives.nccl` (algorithm, protocol, channels), each a collective run, the
fastest kept (:func:`~solvers.event_loop.horizon` stops a candidate once it surely loses).
:mod:`backends`: the step level's collective timers, registered as ``backend`` methods
(``nccl``; ``event``: this engine; ``closed-form``: each algorithm's closed form, the oracle).

**Task graphs**: :mod:`step` list-schedules one step's program on every rank's compute and
communication streams (:mod:`~step.scheduler`, :mod:`~step.run`); where calls of a step or an
iteration meet on a link, :mod:`joint` runs the whole task graph on the same flow network
(:mod:`~joint.engine`: calls alone where nothing shares their links, episodes of calls that
meet, live episodes, link-disjoint components once through :mod:`~reductions.components`; :mod:`~joint.plain`: no shortcut, the
reference every shortcut is tested against). :mod:`~step.job_graph` and :mod:`~step.job_ops`
build a training iteration's graph (:mod:`atpsim.training` chooses what goes in it).

What a solver is given and returns: :mod:`problem`; the one answer of a collective:
:class:`result.CollectiveResult`, whose ``path`` names the reductions and the solver that
ran; routes of all pairs as CSR arrays over links: :mod:`routes`, :mod:`updown_routes`; what a
reference run will cost before it starts: :mod:`budget`.
"""
