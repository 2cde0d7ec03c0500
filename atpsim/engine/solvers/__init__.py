"""Solvers: each times a problem, or answers None where it would not be exact (the
longest-path sweep); the event-driven max-min solver always answers.

The one flow network lives here, shared with the joint network (:mod:`atpsim.engine.joint`):
:mod:`maxmin` (weighted max-min rates by progressive filling; unit weights the plain case),
:mod:`flow_network` (the links, the nodes and the active flows, rates solved lazily over the
component that changed), :mod:`flow_loop` (the reference event loop over it) and
:mod:`flow_kernel` (the same loop compiled, for large collective runs); :mod:`event_loop`
picks between the last two for the collective engine (:mod:`event`).
"""
