"""One network for the whole step: every collective in flight shares the links (issue 13).

A step or a training iteration is a task graph over the ranks (:mod:`graph`): compute as timed
delays on their stream, collective calls (:mod:`calls`: schedule, protocol, fixed latency,
alone time) whose groups enter the network when their last member is ready. :mod:`plain` runs
the whole graph as one network of flows (:mod:`flows`: the flow network's event loop,
:mod:`atpsim.engine.solvers.flow_loop`, with weighted max-min rates re-solved whenever any flow
starts or ends), the reference; :mod:`engine` runs it with exact shortcuts: calls alone
wherever nothing else is on their links, episodes of calls that meet simulated together
(:mod:`episodes`: shift symmetry, memo; :mod:`cohorts`: the comm tasks that start at one
instant, grouped by call). :mod:`network` holds the machine (links as they run, call plans).
The graph's clock is :mod:`tasks` (Python), or for a large graph :mod:`clock_kernel`
(compiled), which also runs the calls that meet nothing once :mod:`lone_kinds` knows their
kind.
"""
