"""The fits, one per kind of measured sample: a link to collective times (:mod:`.link`, written
as a star topology by :mod:`.star`), a hardware profile to GEMM times (:mod:`.profile`, whose
efficiency curve :mod:`.gemm_curve` fits to kernel rates), the memory-bound ops' bandwidth per
op class (:mod:`.memory`), and a collective's fixed cost and bus bandwidth to an NCCL
all-reduce sweep (:mod:`.nccl_overhead`)."""
