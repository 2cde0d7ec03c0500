"""Validation, the simulator's side: fit atpsim's topology and hardware parameters to a
machine's measurements and check its predictions against held-out ones.

The loop is profile -> fit -> predict -> compare (vidur's shape). The measurements come from
``validation/`` (torch.distributed benchmarks writing CSVs) or from nccl-tests logs:

* :mod:`atpsim.validate.nccl_tests` reads ``all_reduce_perf`` output;
* :mod:`atpsim.validate.link_fit` fits a link's bandwidth and latency to collective times;
* :mod:`atpsim.validate.profile_fit` fits a hardware profile to GEMM times;
* :mod:`atpsim.validate.measurements` reads a measurements folder;
* :mod:`atpsim.validate.fit` writes the fitted topology and profile beside the measurements;
* :mod:`atpsim.validate.compare` predicts the whole-layer check points and scores them.

No torch here: this package reads files the torch side wrote.
"""
