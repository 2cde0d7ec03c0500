#!/usr/bin/env bash
# Measure what one GPU can tell atpsim, into one folder.
#
#   bash validation/bench/one_gpu.sh OUT_DIR [--append]
#
# One GPU cannot time a collective (NCCL refuses two ranks on one device), but every rank of
# an ATP mesh runs the same GEMM and memory-bound shapes, so one GPU times each rank's compute
# for meshes of up to WORLDS ranks (default 1,2,4,8). The layer itself is timed on
# DeviceMesh(1,1), where it has no communication: the check point of the compute model alone.
# Steps: the numerics check on one rank, the GEMMs and memory-bound ops of the paper's M2
# layer for each world size, the GEMMs of a GPT-3 175B layer on 8 ranks (the shapes of the
# job-scale reports), square GEMMs, the layer on (1,1) for M2 and a larger layer, and a
# profiler trace of each (the second under OUT_DIR/second/). Each step has a time limit and
# a failed step does not stop the others (its exit code is printed). Environment overrides as
# run_all.sh: HIDDEN HEADS BATCH SEQ DTYPE CHUNKS DROPOUT FLUSH REPS WARMUP, and WORLDS, BIG
# (the GPT-3 175B layer's --hidden/--heads/--batch/--seq), LAYER2 (the second layer's),
# SQUARES, STEP_LIMIT (s), FP8 (1: also time the linears' GEMMs in FP8 into OUT_DIR/fp8/).
set -uo pipefail
out=${1:?usage: one_gpu.sh OUT_DIR [--append]}
extra=("${@:2}")
: "${HIDDEN:=4096}" "${HEADS:=32}" "${BATCH:=4}" "${SEQ:=2048}" "${DTYPE:=bf16}" "${FLUSH:=256M}"
: "${CHUNKS:=1,2,4}" "${DROPOUT:=0.1}" "${REPS:=20}" "${WARMUP:=5}" "${WORLDS:=1,2,4,8}"
: "${BIG:=--hidden 12288 --heads 96 --batch 1 --seq 2048}"
: "${LAYER2:=--hidden 8192 --heads 64 --batch 2 --seq 2048}"
: "${SQUARES:=512,512,512;1024,1024,1024;2048,2048,2048;4096,4096,4096;8192,8192,8192}"
: "${STEP_LIMIT:=150}"
export CUDA_DEVICE_MAX_CONNECTIONS=1  # paper Section 4.2, as run_all.sh
model=(--hidden "$HIDDEN" --heads "$HEADS" --batch "$BATCH" --seq "$SEQ" --chunks "$CHUNKS"
       --dropout "$DROPOUT")
timing=(--dtype "$DTYPE" --reps "$REPS" --warmup "$WARMUP")
mkdir -p "$out"
failed=0

step() {  # step NAME COMMAND...: run with the time limit, print how it ended
  local name=$1 start=$SECONDS
  shift
  echo "== $name: $*"
  timeout "$STEP_LIMIT" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  (( rc == 0 )) || failed=$((failed + 1))
}

# the first benchmark of a file writes it (unless --append was given), the rest append
append=()
[[ " ${extra[*]} " == *" --append "* ]] && append=(--append)
step numerics torchrun --nproc-per-node 1 -m validation.numerics
first=1
for world in ${WORLDS//,/ }; do
  more=("${append[@]}"); (( first )) || more=(--append)
  step "gemm world $world" python3 -m validation.bench.gemm --out "$out" "${timing[@]}" \
    "${more[@]}" --world-size "$world" "${model[@]}" --flush "$FLUSH"
  step "memory ops world $world" python3 -m validation.bench.memory_ops --out "$out" \
    "${timing[@]}" "${more[@]}" --world-size "$world" "${model[@]}" --flush "$FLUSH"
  first=0
done
# FP8 (Transformer Engine's linears): the same GEMMs of batch 1 in E4M3 into $out/fp8/, a
# folder of its own since a fit takes one dtype; FP8=0 skips them (a GPU before sm_89)
if [[ "${FP8:-1}" == 1 ]]; then
  first=1
  for world in ${WORLDS//,/ }; do
    more=("${append[@]}"); (( first )) || more=(--append)
    step "gemm fp8 world $world" python3 -m validation.bench.gemm --out "$out/fp8" \
      --dtype fp8 --reps "$REPS" --warmup "$WARMUP" "${more[@]}" --world-size "$world" \
      "${model[@]}" --flush "$FLUSH"
    first=0
  done
  # shellcheck disable=SC2086
  step "gemm fp8 gpt3-175b on 8" python3 -m validation.bench.gemm --out "$out/fp8" --dtype fp8 \
    --reps "$REPS" --warmup "$WARMUP" --append --world-size 8 $BIG --chunks 1 \
    --dropout "$DROPOUT" --flush "$FLUSH" --shapes "$SQUARES"
fi
# shellcheck disable=SC2086  # BIG is a list of options
step "gemm gpt3-175b on 8" python3 -m validation.bench.gemm --out "$out" "${timing[@]}" --append \
  --world-size 8 $BIG --chunks 1 --dropout "$DROPOUT" --flush "$FLUSH" --shapes "$SQUARES"
step "layer (1,1)" torchrun --nproc-per-node 1 -m validation.bench.layer --out "$out" \
  "${timing[@]}" "${model[@]}"
# shellcheck disable=SC2086
step "layer (1,1) second" torchrun --nproc-per-node 1 -m validation.bench.layer --out "$out" \
  "${timing[@]}" --append $LAYER2 --chunks 1,2 --dropout "$DROPOUT"
step "profile (1,1)" torchrun --nproc-per-node 1 -m validation.bench.profile_layer --out "$out" \
  --dtype "$DTYPE" "${model[@]}" --chunks 1 --meshes 1x1 --steps 2
# shellcheck disable=SC2086
step "profile (1,1) second" torchrun --nproc-per-node 1 -m validation.bench.profile_layer \
  --out "$out/second" --dtype "$DTYPE" $LAYER2 --chunks 1 --dropout "$DROPOUT" --meshes 1x1 --steps 2
echo "measurements in $out; $failed step(s) failed"
exit $(( failed > 0 ))
