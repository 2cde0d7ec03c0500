"""Megatron-LM's and torchrun's flags as :mod:`atpsim.importers.megatron` sorts them: those
it reads (:data:`READ_FLAGS`, the value-less :data:`SWITCHES`), those that size the job
(:data:`LAUNCHER_FLAGS`), those understood but with no bearing on an iteration's time
(:data:`IGNORED_FLAGS`) and those understood but not simulated (:data:`NOT_MODELLED_FLAGS`),
each with why. Names as Megatron-LM's ``megatron/training/arguments.py`` and torchrun spell
them; kept apart from the reader so the reader reads as steps."""

from __future__ import annotations

#: torchrun's options that size the job (``--nnodes``, ``--nproc-per-node``), both spellings.
_NODES = ("--nnodes",)
_PER_NODE = ("--nproc-per-node", "--nproc_per_node")
LAUNCHER_FLAGS = _NODES + _PER_NODE

#: Flags understood, with no bearing on one iteration's time, and why.
_OPTIMIZER = "optimizer or learning-rate setting"
_DATA = "data or tokenizer file"
_RUN = "logging, checkpointing, evaluation or run length"
_NUMERICS = "numerics: the same operations at the same precision"
IGNORED_FLAGS: dict[str, str] = {
    **dict.fromkeys((
        "--lr", "--min-lr", "--lr-decay-style", "--lr-decay-iters", "--lr-decay-samples",
        "--lr-warmup-fraction", "--lr-warmup-iters", "--lr-warmup-samples", "--lr-warmup-init",
        "--lr-wsd-decay-style", "--lr-wsd-decay-iters", "--lr-wsd-decay-samples",
        "--weight-decay", "--start-weight-decay", "--end-weight-decay",
        "--weight-decay-incr-style", "--clip-grad", "--adam-beta1", "--adam-beta2",
        "--adam-eps", "--init-method-std", "--seed", "--attention-dropout", "--hidden-dropout",
        "--loss-scale", "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window",
        "--hysteresis", "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler",
        "--decoupled-lr", "--decoupled-min-lr", "--moe-aux-loss-coeff", "--moe-z-loss-coeff",
        "--moe-router-load-balancing-type", "--moe-router-score-function",
        "--moe-router-pre-softmax", "--embedding-init-method-std",
    ), _OPTIMIZER),
    **dict.fromkeys((
        "--data-path", "--split", "--train-data-path", "--valid-data-path", "--test-data-path",
        "--data-cache-path", "--data-args-path", "--mock-data", "--vocab-file", "--merge-file",
        "--tokenizer-model", "--num-workers", "--dataloader-type", "--reset-position-ids",
        "--reset-attention-mask", "--eod-mask-loss", "--num-dataset-builder-threads",
        "--no-mmap-bin-files", "--no-create-attention-mask-in-dataloader", "--tokenizer-type",
        "--vocab-size", "--make-vocab-size-divisible-by",
    ), _DATA),
    **dict.fromkeys((
        "--train-iters", "--train-samples", "--exit-interval", "--exit-duration-in-mins",
        "--exit-signal-handler", "--log-interval", "--save-interval", "--eval-interval",
        "--eval-iters", "--save", "--load", "--pretrained-checkpoint", "--finetune",
        "--tensorboard-dir", "--tensorboard-log-interval", "--tensorboard-queue-size",
        "--log-throughput", "--log-timers-to-tensorboard", "--log-validation-ppl-to-tensorboard",
        "--log-memory-to-tensorboard", "--log-world-size-to-tensorboard", "--log-params-norm",
        "--log-num-zeros-in-grad", "--log-progress", "--timing-log-level", "--timing-log-option",
        "--wandb-project", "--wandb-exp-name", "--wandb-save-dir", "--wandb-entity",
        "--ckpt-format", "--use-dist-ckpt", "--async-save", "--ckpt-fully-parallel-load",
        "--no-load-optim", "--no-load-rng", "--no-save-optim", "--no-save-rng",
        "--distributed-timeout-minutes", "--distributed-backend", "--use-mcore-models",
        "--no-check-for-nan-in-loss-and-grad", "--profile", "--profile-step-start",
        "--profile-step-end", "--profile-ranks", "--use-pytorch-profiler", "--manual-gc",
        "--manual-gc-interval", "--local-rank", "--use-cpu-initialization",
        "--rampup-batch-size", "--logging-level", "--log-energy",
    ), _RUN),
    **dict.fromkeys((
        "--attention-softmax-in-fp32", "--accumulate-allreduce-grads-in-fp32",
        "--apply-query-key-layer-scaling", "--norm-epsilon", "--rotary-base", "--rotary-percent",
        "--rotary-interleaved", "--use-rope-scaling", "--rope-scaling-factor", "--fp8-margin",
        "--fp8-interval", "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-recipe",
        "--transformer-impl", "--no-async-tensor-model-parallel-allreduce",
        "--apply-layernorm-1p", "--add-qkv-bias", "--init-method-xavier-uniform",
    ), _NUMERICS),
    "--max-position-embeddings": "the position table's size: its lookup is not timed",
    "--optimizer": "Adam (the default) is what atpsim's optimizer step and memory assume",
    "--squared-relu": "the same GEMMs as GeLU",
    "--openai-gelu": "the same GEMMs as GeLU",
}  # fmt: skip

#: Flags understood that change a real run's time or memory, which atpsim does not simulate.
NOT_MODELLED_FLAGS: dict[str, str] = {
    "--use-flash-attn": "attention is timed unfused (its s x s scores written out); "
                        "FlashAttention is faster and keeps less memory",
    "--attention-backend": "attention is timed unfused, whatever the backend",
    "--normalization": "RMSNorm is timed as LayerNorm",
    "--position-embedding-type": "rotary and other position embeddings are not timed",
    "--use-rotary-position-embeddings": "rotary position embeddings are not timed",
    "--disable-bias-linear": "linear biases are counted as Megatron-LM's default "
                             "(add_bias_linear): under 0.01% of the parameters",
    "--tp-comm-overlap": "TP communication overlapped with GEMMs (Transformer Engine "
                         "userbuffers) is not simulated: TP communication is exposed",
    "--overlap-param-gather": "the distributed optimizer's parameter all-gather runs after the "
                              "optimizer step, not overlapped with the next forward",
    "--overlap-p2p-communication-warmup-flush": "pipeline sends are timed as atpsim's schedule "
                                                "issues them",
    "--no-overlap-p2p-communication": "pipeline sends are timed as atpsim's schedule issues them",
    "--no-gradient-accumulation-fusion": "kernel fusion is not modelled op by op",
    "--cross-entropy-loss-fusion": "kernel fusion is not modelled op by op",
    "--no-bias-gelu-fusion": "kernel fusion is not modelled op by op",
    "--no-bias-swiglu-fusion": "kernel fusion is not modelled op by op",
    "--no-bias-dropout-fusion": "kernel fusion is not modelled op by op",
    "--no-masked-softmax-fusion": "kernel fusion is not modelled op by op",
    "--no-rope-fusion": "kernel fusion is not modelled op by op",
    "--moe-grouped-gemm": "expert GEMMs are timed one expert at a time",
    "--moe-token-dispatcher-type": "the dispatch is timed as atpsim's all-to-all",
    "--moe-permute-fusion": "kernel fusion is not modelled op by op",
    "--moe-shared-expert-intermediate-size": "shared experts are not modelled",
    "--moe-router-topk-scaling-factor": "routing is timed as plain top-k",
    "--expert-tensor-parallel-size": "experts are split over TP as the dense layers are",
    "--kv-channels": "a head's width is hidden / heads",
    "--recompute-method": "'block' recomputes only some layers; atpsim recomputes every layer "
                          "at the granularity given",
    "--recompute-num-layers": "atpsim recomputes every layer at the granularity given",
    "--recompute-modules": "selective recomputation is attention's core only",
    "--distribute-saved-activations": "stored activations are not split over TP",
    "--cpu-offloading-num-layers": "CPU offloading of layers is not modelled",
    "--account-for-embedding-in-pipeline-split": "the partition is the one given (or even)",
    "--account-for-loss-in-pipeline-split": "the partition is the one given (or even)",
    "--pipeline-model-parallel-layout": "the partition is the one given (or even)",
    "--num-distributed-optimizer-instances": "one distributed optimizer over all of DP",
    "--use-torch-fsdp2": "FSDP (ZeRO-3) is not modelled: ZeRO 0 or 1 only",
    "--use-megatron-fsdp": "FSDP (ZeRO-3) is not modelled: ZeRO 0 or 1 only",
    "--data-parallel-sharding-strategy": "FSDP sharding is not modelled: ZeRO 0 or 1 only",
    "--fp8-param-gather": "parameters are gathered in the model's dtype",
    "--first-last-layers-bf16": "every layer runs in the model's dtype",
    "--ddp-bucket-size": "gradient buckets are atpsim's (JobConfig.bucket_bytes)",
    "--ddp-num-buckets": "gradient buckets are atpsim's (JobConfig.bucket_bytes)",
    "--use-tp-pp-dp-mapping": "ranks are ordered tp-cp-dp-pp (Megatron-Core's default order)",
    "--multi-latent-attention": "multi-latent attention is timed as multi-head attention",
    "--mtp-num-layers": "multi-token prediction layers are not modelled",
    "--window-size": "sliding-window attention is timed as full attention",
    "--moe-layer-recompute": "selective recomputation is attention's core only",
}

#: Flags that take no value (``action='store_true'`` / ``'store_false'``) among those read.
SWITCHES = frozenset({
    "--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights", "--bf16",
    "--fp16", "--sequence-parallel", "--recompute-activations", "--use-distributed-optimizer",
    "--overlap-grad-reduce", "--grad-reduce-in-bf16",
})  # fmt: skip


#: Every flag :func:`import_megatron` reads (for "did you mean").
READ_FLAGS = (
    "--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size", "--swiglu",
    "--group-query-attention", "--num-query-groups", "--seq-length", "--encoder-seq-length",
    "--untie-embeddings-and-output-weights", "--bf16", "--fp16", "--fp8-format", "--vocab-size",
    "--padded-vocab-size", "--tokenizer-type", "--make-vocab-size-divisible-by", "--num-experts",
    "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-layer-freq", "--moe-expert-capacity-factor",
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--context-parallel-size", "--expert-model-parallel-size", "--micro-batch-size",
    "--global-batch-size", "--sequence-parallel", "--recompute-granularity",
    "--recompute-activations", "--use-distributed-optimizer", "--overlap-grad-reduce",
    "--grad-reduce-in-bf16",
)  # fmt: skip
