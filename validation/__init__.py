"""Validation harness: real ATP tensor-parallel kernels on torch.distributed, their numerics
against a single-process reference, and benchmarks that measure a machine (issue 6).

The only part of the project that imports torch; :mod:`atpsim` never imports it.

* :mod:`validation.mesh` — DeviceMesh(d1, d2) process groups (``init_mesh``).
* :mod:`validation.comm` — the conjugate operators and the scatter / gather around attention.
* :mod:`validation.linear` — row-first and column-first ``ATPLinear`` from a shard spec.
* :mod:`validation.layer` — the ATP transformer layer with chunk-based overlap.
* :mod:`validation.reference` — the single-process reference layer.
* :mod:`validation.numerics` — the layer-versus-reference check.
* :mod:`validation.bench` — benchmarks launched with torchrun, writing CSVs.
"""
