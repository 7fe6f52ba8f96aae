#!/usr/bin/env bash
# Issue 28's GPU measurements in one call of a lent GPU (the device tool runs it from the repository root; it
# needs only torch, torchvision and numpy there). Each step has its own time limit, so that one slow step leaves
# the others' results; everything goes under ${OUT:-results/gpu28} (the device tool's $OUT comes back).
#
#   1. fl_train_bench: the FL round (per-client loop, kept-preprocessed loop, vectorised chunk 15) against
#      centralised training of SqueezeNet 1.1 at 224 px, fp32 with TF32 off (the suite's paper numerics: the
#      throughput table's number) and bf16 autocast (the side-by-side rate); kept_check says whether the kept
#      images are the per-batch preprocessing bit for bit on this GPU.
#   2. gpu_share_bench: K jobs sharing the GPU (gpu_slots), 4convNet FedBABU rounds (fedbabu's small jobs) and
#      SqueezeNet FT rounds (legate2023's): aggregate gain K x wall(1) / wall(K).
#
# Afterwards (on the development machine): copy fl_train/fl_train_bench.json to
# benchmark/fl/measured/fl_train_bench_h100.json (an H100 only: the table's machine), point throughput.yaml's
# training.h100.squeezenet1_1 at it ({bench: measured/fl_train_bench_h100.json, mode: loop, precision: fp32}),
# and record the numbers in docs/performance.md ("GPU economy, measured").
set -u
OUT="${OUT:-results/gpu28}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1
step() {  # step NAME SECONDS COMMAND...: run with a limit, log, keep going
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit} s) $(date -u +%T)"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "== $name: exit $? $(date -u +%T)"
    tail -n 12 "$OUT/$name.log"
}
step fl_train 240 python tools/fl_train_bench.py --out "$OUT/fl_train" --precisions fp32,bf16 \
    --modes loop,kept,vectorised --chunks 15 --rounds 2 --central-steps 6
step share_pfl 120 python tools/gpu_share_bench.py --out "$OUT/share_pfl" --copies 1,2,4 -- \
    python tools/pfl_bench.py --out '{out}' --model 4convnet --modes loop --rounds 3 --no-check
step share_ft 150 python tools/gpu_share_bench.py --out "$OUT/share_ft" --copies 1,2 -- \
    python tools/fl_train_bench.py --out '{out}' --modes loop --precisions fp32 --rounds 2 --central-steps 2 \
    --test-size 1000 --no-check
