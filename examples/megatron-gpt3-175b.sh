#!/bin/bash
# GPT-3 175B (Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1) launched
# with Megatron-LM on 128 DGX nodes of 8 GPUs: written for atpsim's importer (atpsim import
# megatron examples/megatron-gpt3-175b.sh -o job.yaml). Architecture and training values are
# the paper's; the layout (TP 8 x PP 16) is Megatron-LM's usual one for this model.
GPT_ARGS=(
    --num-layers 96 --hidden-size 12288
    --num-attention-heads 96
    --seq-length 2048
    --max-position-embeddings 2048
    --tokenizer-type GPT2BPETokenizer
    --vocab-file $DATA_DIR/gpt2-vocab.json
    --merge-file $DATA_DIR/gpt2-merges.txt
)
PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 16
    --sequence-parallel
    --use-distributed-optimizer
    --overlap-grad-reduce
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1536
    --bf16
    --recompute-activations
    --use-flash-attn
    --lr 6.0e-5 --min-lr 6.0e-6 --lr-decay-style cosine
    --adam-beta1 0.9 --adam-beta2 0.95 --weight-decay 0.1 --clip-grad 1.0
    --train-samples 146484375
)
OUTPUT_ARGS=(
    --data-path $DATA_DIR/pile_text_document
    --split 969,30,1
    --log-interval 100
    --save-interval 1000
    --eval-interval 1000
    --eval-iters 10
    --save $CHECKPOINT_DIR
)
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 128 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 \
    pretrain_gpt.py \
    "${GPT_ARGS[@]}" \
    "${PARALLEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${OUTPUT_ARGS[@]}"
