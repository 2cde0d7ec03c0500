"""Benchmarks that measure a machine for atpsim's fit, launched with torchrun (issue 6 item 3).

* :mod:`validation.bench.collectives` — all-reduce / all-gather time by message size on each
  mesh dimension's groups, all groups of the dimension at once.
* :mod:`validation.bench.gemm` — GEMM time by (m, n, k, batch) for the shapes a mesh produces.
* :mod:`validation.bench.layer` — the ATP layer's forward + backward time per mesh and chunks.

Each writes ``<name>.csv`` and ``<name>.machine.json`` into ``--out``; the columns are declared
in each module's ``COLUMNS`` and described in ``validation/README.md``.
"""
