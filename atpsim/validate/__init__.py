"""Validation, the simulator's side: fit atpsim's topology and hardware parameters to a
machine's measurements and check its predictions against held-out ones.

The loop is profile -> fit -> predict -> compare (vidur's shape). The measurements come from
``validation/`` (torch.distributed benchmarks writing CSVs) or from nccl-tests logs; the fit
points are collectives, GEMMs (and memory-bound ops, when measured), the check points whole
layers:

* :mod:`atpsim.validate.measurements` reads a measurements folder into typed samples;
  :mod:`atpsim.validate.nccl_tests` reads ``all_reduce_perf`` output;
* :mod:`atpsim.validate.link_fit` fits a link's bandwidth and latency to collective times,
  :mod:`atpsim.validate.star` writes it as a custom topology;
* :mod:`atpsim.validate.profile_fit` fits a hardware profile to GEMM times,
  :mod:`atpsim.validate.memory_fit` the memory-bound ops' bandwidth;
* :mod:`atpsim.validate.machine` says what a CPU/gloo (or GPU) machine adds: memory figures,
  the core share of oversubscribed ranks, whether communication can overlap compute;
* :mod:`atpsim.validate.fit` writes the fitted files beside the measurements;
* :mod:`atpsim.validate.compare` predicts the layers with the event simulation and scores them
  against ``tolerance.yaml`` (:mod:`atpsim.validate.settings`).

No torch here: this package reads files the torch side wrote.
"""
