"""Calibration: fit atpsim's topology and hardware parameters to measurements, then check the
fitted simulator against measurements it was not fitted to.

The loop is measurements -> fit -> compare (vidur's profile -> fit -> predict shape), one
subpackage or module per stage:

* :mod:`atpsim.calibrate.measurements` reads what was measured: a machine's measurements
  folder (CSV tables, nccl-tests logs, the machine description) into typed samples, and the
  folder's ``tolerance.yaml``;
* :mod:`atpsim.calibrate.fit` fits one model per kind of sample: a link's bandwidth and latency
  to collective times (written as a star topology), a hardware profile's peak, per-call
  overhead and GEMM curve to GEMM times, the memory-bound ops' bandwidth per op class, and a
  collective's fixed cost to an NCCL all-reduce sweep;
* :mod:`atpsim.calibrate.compare` gathers the measured layers with the fitted files and
  scores the simulator's prediction of each (passed in by :mod:`atpsim.api.calibrate`, the
  simulator's own path for a point) against the tolerance: the verdict of ``atpsim validate``,
  a typed table whose files :mod:`atpsim.report.calibration` writes.

Two uses of it:

* :mod:`atpsim.calibrate.machine`, the measured-machine fit: fit a folder of
  ``validation/measurements/`` (written by the torch harness of ``validation/``) and write
  ``fitted/`` beside it (``atpsim validate``);
* :mod:`atpsim.calibrate.paper`, the paper-machine fit: fit the paper's machines IC1-IC4 to
  its Table 3 and write the fitted values into the data files (``python -m
  atpsim.calibrate.paper``).

No torch here: this package reads files the torch side wrote.
"""
