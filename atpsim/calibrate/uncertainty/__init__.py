"""How far to trust a prediction: every fitted parameter's uncertainty, and its propagation.

A fit records, beside the values it writes, how well its data pinned them
(:mod:`~atpsim.calibrate.uncertainty.record`, estimated by
:mod:`~atpsim.calibrate.uncertainty.estimate`: the least-squares covariance or a residual
bootstrap, each fit saying which and why). :mod:`~atpsim.calibrate.uncertainty.sources` finds
the records; :mod:`~atpsim.calibrate.uncertainty.draws` makes seeded draws, the same for every
point of a sweep; :mod:`~atpsim.calibrate.uncertainty.apply` turns a draw into the simulator's
own inputs (a preset, a hardware profile, an NCCL profile); and
:mod:`~atpsim.calibrate.uncertainty.summary` reduces the simulated draws to percentiles and a
ranking's confidence.
"""
