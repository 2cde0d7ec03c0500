"""The results schema of a job scenario: one row per whole training iteration of a
data x pipeline x tensor-parallel layout (:func:`atpsim.training.job.run_job`).

A row's first columns describe the point (:meth:`atpsim.scenario.job_point.JobPoint.columns`),
the rest are what the simulation predicted. ``tp_scheme`` is ``megatron-1d`` for Megatron-LM's
1D tensor parallelism (DeviceMesh(t, 1)) and ``atp-2d`` for an ATP mesh with d2 > 1 (the
report compares the best of each). The times are those of the critical pipeline stage and add
up: compute + exposed TP + exposed DP + bubble + other = iteration time. A layout whose busiest
rank does not fit the GPU's memory is a row with ``fits_memory`` false and empty times: it is
not simulated (as :func:`atpsim.api.plan_job` prunes it). TFLOP/s are SI (10^12).
"""

from __future__ import annotations

from atpsim.results.schema import Column, ResultsSchema

_c = Column

#: Every column of a job table, in table order.
JOB_COLUMNS: tuple[Column, ...] = (
    _c("scenario", "string", "", "scenario name"),
    _c("point_key", "string", "", "stable key of the sweep point (resume key)"),
    _c("topology", "string", "", "topology label (preset or builder spec)"),
    _c("hardware", "string", "", "hardware profile of the GPUs"),
    _c("model", "string", "", "model name (a preset or the scenario's)"),
    _c("hidden", "int", "", "hidden size h"),
    _c("heads", "int", "", "attention heads"),
    _c("layers", "int", "", "transformer layers L"),
    _c("seq", "int", "tokens", "sequence length s"),
    _c("vocab", "int", "tokens", "vocabulary (padded; 0: no embedding and LM head)"),
    _c("dtype", "string", "", "tensor dtype"),
    _c("n_devices", "int", "GPUs", "GPUs of the job (tp x pp x dp)"),
    _c("tp_scheme", "string", "", "megatron-1d (mesh t x 1) or atp-2d (d2 > 1)"),
    _c("d1", "int", "GPUs", "TP mesh dimension 1 of DeviceMesh(d1, d2)"),
    _c("d2", "int", "GPUs", "TP mesh dimension 2 of DeviceMesh(d1, d2)"),
    _c("tp_mesh", "string", "", "TP mesh as 'd1xd2'"),
    _c("tp", "int", "GPUs", "tensor-parallel degree d1 x d2"),
    _c("pp", "int", "", "pipeline stages"),
    _c("dp", "int", "", "data-parallel replicas"),
    _c("order", "string", "", "layout dimensions, innermost first (e.g. tp,pp,dp)"),
    _c("placement", "string", "", "placement of TP mesh positions on GPU ranks"),
    _c("micro_batch", "int", "samples", "samples per micro-batch"),
    _c("global_batch", "int", "samples", "samples per iteration"),
    _c("n_microbatches", "int", "", "micro-batches per replica per iteration"),
    _c("schedule", "string", "", "pipeline schedule (gpipe, 1f1b, interleaved-1f1b)"),
    _c("virtual_stages", "int", "", "model chunks per pipeline stage (interleaved)"),
    _c("chunks", "int", "", "chunks of a micro-batch for TP compute/communication overlap"),
    _c("algorithm", "string", "", "collective algorithm"),
    _c("sequence_parallel", "bool", "", "Megatron-LM sequence parallelism (1D TP only)"),
    _c("recompute", "string", "", "activation recomputation: none, selective or full"),
    _c("zero", "int", "", "ZeRO stage (0 or 1)"),
    _c("network", "string", "", "joint (calls in flight share links) or isolated (each alone)"),
    _c("perturb", "string", "", "slow GPUs and links (parallelism.perturb; none)"),
    _c("neighbour", "string", "", "a second job on the next GPUs of the fabric (none)"),
    _c("iteration_time_s", "float", "s", "time of one training iteration"),
    _c("samples_per_s", "float", "samples/s", "global batch / iteration time"),
    _c("tflops_per_gpu", "float", "TFLOP/s (1e12)", "model FLOPs / iteration time / GPUs"),
    _c("hardware_tflops_per_gpu", "float", "TFLOP/s (1e12)", "as above, recomputation counted"),
    _c("mfu", "float", "", "model FLOPs utilization: tflops_per_gpu / peak"),
    _c("compute_s", "float", "s", "compute on the critical stage"),
    _c("exposed_tp_comm_s", "float", "s", "TP communication not hidden behind compute"),
    _c("exposed_dp_comm_s", "float", "s", "gradient synchronization not hidden"),
    _c("pipeline_bubble_s", "float", "s", "critical stage idle in the pipeline"),
    _c("other_s", "float", "s", "optimizer step, ZeRO gather, waiting inside a pass"),
    _c("max_link_utilization", "float", "", "busiest directed link's busy time / iteration time"),
    _c("busiest_link", "string", "", "that link, src->dst (write_job_links: every link)"),
    _c("alone_iteration_time_s", "float", "s", "iteration time without the neighbour job"),
    _c("slowdown", "float", "", "iteration time with the neighbour / alone"),
    _c("neighbour_slowdown", "float", "", "the neighbour job's iteration time with this one / alone"),
    _c("memory_per_rank_bytes", "float", "B", "busiest rank's weights, optimizer, activations"),
    _c("fits_memory", "bool", "", "memory_per_rank_bytes fits the GPU memory"),
    _c("status", "string", "", "ok | failed"),
    _c("error", "string", "", "error message of a failed point"),
    _c("point_index", "int", "", "index of the point in the expanded sweep (row order)"),
)

#: Columns that describe a job point; the rest are results.
JOB_POINT_COLUMNS: tuple[str, ...] = (
    "scenario", "point_key", "topology", "hardware", "model", "hidden", "heads", "layers", "seq",
    "vocab", "dtype", "n_devices", "tp_scheme", "d1", "d2", "tp_mesh", "tp", "pp", "dp", "order",
    "placement", "micro_batch", "global_batch", "n_microbatches", "schedule", "virtual_stages",
    "chunks", "algorithm", "sequence_parallel", "recompute", "zero", "network", "perturb",
    "neighbour", "point_index",
)  # fmt: skip

JOB_SCHEMA = ResultsSchema(
    "job", JOB_COLUMNS, JOB_POINT_COLUMNS,
    ("topology", "n_devices", "model", "tp_mesh", "pp", "dp", "micro_batch", "schedule"),
)  # fmt: skip
