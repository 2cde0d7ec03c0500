"""Which profiler event names are GEMMs, collectives, memory-bound work or bookkeeping.

A PyTorch profiler (Kineto) trace names CPU operators after the ATen op (``aten::mm``) and
GPU kernels after the library's kernel (``sm90_xmma_gemm_...``, ``ncclDevKernel_AllReduce_...``).
This table sorts them into the three kinds of op in atpsim's program (:mod:`atpsim.program`):

* **GEMM** (program ``gemm`` ops): CPU operators ``aten::mm``, ``aten::addmm``, ``aten::bmm``,
  ``aten::baddbmm``, ``aten::addbmm``, ``aten::_addmm_activation``, ``aten::_scaled_mm``; GPU
  kernels whose name has ``gemm``, ``cutlass``, ``xmma``, ``cublas`` or ``nvjet``
  (``ampere_sgemm_128x64_nn``, ``sm90_xmma_gemm_*``, ``cutlass_80_tensorop_*``, ``nvjet_tst_*``).
* **collective** (program ``CommOp``): gloo's work ranges ``gloo:all_reduce``,
  ``gloo:all_gather``, ``gloo:reduce_scatter``, ``gloo:broadcast``, ``gloo:reduce``,
  ``gloo:all_to_all``; NCCL kernels ``ncclDevKernel_AllReduce_*`` (``ncclKernel_*`` before
  NCCL 2.19), ``..._AllGather_*``, ``..._ReduceScatter_*``, ``..._Broadcast_*``, ``..._Reduce_*``.
* **memory-bound** (program ``memory`` ops): every other leaf CPU operator (``aten::softmax``,
  ``aten::native_layer_norm``, ``aten::gelu``, ``aten::bernoulli_``, ``aten::add``, ...) or
  every other GPU kernel (``*softmax*``, ``*layer_norm*``, ``vectorized_elementwise_kernel``).

Bookkeeping, never timed as work: view and allocation operators (``aten::view``,
``aten::empty``, ``aten::t``, ...; :data:`BOOKKEEPING_OPS`) and the CPU side of a collective
(``c10d::allreduce_``, ``nccl:all_reduce`` enqueue ranges: the work is the gloo thread's
``gloo:*`` range or the NCCL kernel). The collective names are those of
:mod:`atpsim.program`'s ``CommOp.collective``. A gloo range's duration is its work *and* its
wait for the other ranks to arrive, as an NCCL kernel's is.
"""

from __future__ import annotations

import re

#: CPU operators that run one GEMM (or a batch of them) each.
GEMM_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
    "aten::_addmm_activation", "aten::_scaled_mm", "aten::_int_mm",
})  # fmt: skip
#: GPU kernel names of GEMM libraries (cuBLAS, cuBLASLt, CUTLASS; Ampere/Hopper families).
GEMM_KERNEL = re.compile(r"gemm|cutlass|xmma|cublas|nvjet|s1688|h1688|s16816|h16816", re.I)
#: gloo's work ranges (a thread of the process group): ``gloo:<collective>``.
GLOO_PREFIX = "gloo:"
#: NCCL kernels: ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_AllGather_RING_LL_...``.
NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)_")
_NCCL_COLLECTIVES = {
    "AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "all_to_all",
}  # fmt: skip
_GLOO_COLLECTIVES = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
    "allgather": "all_gather", "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "all_to_all_single": "all_to_all",
}  # fmt: skip
#: The CPU side of a collective: its enqueue, not its work (the work is a gloo range or an
#: NCCL kernel); operators under it are not compute either.
COMM_CALL_PREFIXES = ("c10d::", "nccl:", "gloo:", "record_param_comms")
#: Operators that move no data (views, allocation, metadata): never a memory-bound op.
BOOKKEEPING_OPS = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::as_strided", "aten::reshape",
    "aten::_reshape_alias", "aten::empty", "aten::empty_like", "aten::empty_strided",
    "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::detach", "detach",
    "aten::resolve_conj", "aten::resolve_neg", "aten::select", "aten::slice", "aten::narrow",
    "aten::unbind", "aten::split", "aten::chunk", "aten::alias", "aten::lift_fresh",
    "aten::resize_", "aten::unsqueeze", "aten::squeeze", "aten::numpy_T", "aten::contiguous",
    "aten::split_with_sizes", "aten::unflatten", "aten::flatten", "aten::result_type",
    "aten::to", "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense",
})  # fmt: skip
#: Wrappers the autograd engine puts around each backward node (phase marker).
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
#: Autograd's own ranges (gradient accumulation, node wrappers): no kernel of the program.
AUTOGRAD_PREFIXES = ("autograd::", "torch::autograd::")
#: The range ``torch.profiler`` (``prof.step()``) or the harness puts around each step.
STEP_PREFIX = "ProfilerStep#"


def gloo_collective(name: str) -> str | None:
    """``gloo:all_reduce`` -> ``all_reduce``; None for other names (and ``gloo:barrier``)."""
    if not name.startswith(GLOO_PREFIX):
        return None
    return _GLOO_COLLECTIVES.get(name[len(GLOO_PREFIX):].lower())


def nccl_collective(name: str) -> str | None:
    """``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` -> ``all_reduce``; None if not NCCL's."""
    match = NCCL_KERNEL.match(name)
    return _NCCL_COLLECTIVES.get(match.group(1)) if match else None


def is_gemm_kernel(name: str) -> bool:
    """A GPU kernel of a GEMM library (and not NCCL's)."""
    return bool(GEMM_KERNEL.search(name)) and nccl_collective(name) is None


def is_comm_call(name: str) -> bool:
    """The CPU side of a collective (its enqueue or its gloo work range)."""
    return name.startswith(COMM_CALL_PREFIXES)
