#!/usr/bin/env bash
# Measure this machine for atpsim: the numerics check, then every benchmark, into one folder.
#
#   bash validation/bench/run_all.sh OUT_DIR [NPROC] [--append]
#
# NPROC defaults to the number of GPUs (2 without one). Model and sizes come from the
# environment, with defaults for GPUs (the paper's M2 layer, bf16) or the CPU (a small fp32
# layer): HIDDEN HEADS BATCH SEQ DTYPE CHUNKS DROPOUT MAX_BYTES FLUSH REPS WARMUP. HEADS must
# divide by NPROC. FLUSH (bytes written before each GEMM / memory-op repetition, default twice
# the last-level cache or more) makes those ops start from cold caches, as inside a layer.
# Extra arguments (e.g. --append, to add a second run's repetitions) go to every benchmark.
set -euo pipefail
out=${1:?usage: run_all.sh OUT_DIR [NPROC] [--append]}
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
nproc=${2:-$(( gpus > 0 ? gpus : 2 ))}
extra=("${@:3}")
if (( gpus > 0 )); then
  : "${HIDDEN:=4096}" "${HEADS:=32}" "${BATCH:=4}" "${SEQ:=2048}" "${DTYPE:=bf16}" "${MAX_BYTES:=1G}" \
    "${FLUSH:=256M}"
  export CUDA_DEVICE_MAX_CONNECTIONS=1  # paper Section 4.2: keep NCCL kernels from being delayed
else
  : "${HIDDEN:=256}" "${HEADS:=8}" "${BATCH:=4}" "${SEQ:=128}" "${DTYPE:=fp32}" "${MAX_BYTES:=16M}" \
    "${FLUSH:=64M}"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi
: "${CHUNKS:=1,2,4}" "${DROPOUT:=0.1}" "${REPS:=20}" "${WARMUP:=5}"
model=(--hidden "$HIDDEN" --heads "$HEADS" --batch "$BATCH" --seq "$SEQ" --chunks "$CHUNKS"
       --dropout "$DROPOUT")
timing=(--dtype "$DTYPE" --reps "$REPS" --warmup "$WARMUP" "${extra[@]}")
mkdir -p "$out"

torchrun --nproc-per-node "$nproc" -m validation.numerics
torchrun --nproc-per-node "$nproc" -m validation.bench.collectives --out "$out" "${timing[@]}" \
  --min-bytes 1K --max-bytes "$MAX_BYTES" --factor 4
python3 -m validation.bench.gemm --out "$out" "${timing[@]}" --world-size "$nproc" \
  "${model[@]}" --flush "$FLUSH"
python3 -m validation.bench.memory_ops --out "$out" "${timing[@]}" --world-size "$nproc" \
  "${model[@]}" --flush "$FLUSH"
torchrun --nproc-per-node "$nproc" -m validation.bench.layer --out "$out" "${timing[@]}" "${model[@]}"
echo "measurements in $out"
