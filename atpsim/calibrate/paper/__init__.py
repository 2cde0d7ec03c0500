"""The paper-machine fit: calibrate the paper's machines IC1-IC4 against its own measurements.

The simulator is built from spec sheets and modern measurements; the paper's numbers were taken
with a 2022 software stack (Megatron-LM v2.6 era, no optimized kernels) on machines that run
far below their spec sheets (IC1 stages every copy through host memory; IC4's inter-node rate
is a fraction of HDR). This package fits a few physically meaningful parameters so that the
event simulation reproduces the paper's Table 3, and keeps the rest of Table 3 as a check:

- :mod:`~atpsim.calibrate.paper.table3`: the paper's Table 3 cells (M2, M3; M4 is held out) and
  IC1's calibrated bandwidths (Section 5.3) as data, and the simulation of one cell (best mesh
  over the factorizations of 8 GPUs, as the paper's baseline is "the optimal ATP strategy").
- :mod:`~atpsim.calibrate.fit.nccl_overhead`: the per-collective overhead and NVSwitch bus
  bandwidth from a measured NCCL all-reduce sweep (not from the paper).
- :mod:`~atpsim.calibrate.paper.parameters`: the fitted parameters, their units, meaning and where
  each one goes (a preset parameter or the paper-stack hardware profile).
- :mod:`~atpsim.calibrate.paper.fit`: the least-squares fit on log errors; the command
  ``python -m atpsim.calibrate.paper`` (:mod:`~atpsim.calibrate.paper.__main__`) runs it,
  prints parameters, residuals and check-set errors (:mod:`~atpsim.calibrate.paper.printout`)
  and writes the fitted values into the data files (:mod:`~atpsim.calibrate.paper.datafiles`);
  the last fit is recorded in ``atpsim/data/calibration/paper-fit.yaml``
  (:mod:`~atpsim.calibrate.paper.record`).
"""
