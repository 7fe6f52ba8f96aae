#!/usr/bin/env bash
# Issue 28's GPU measurements in one call of a lent GPU (the device tool runs it from the repository root with
# the image's python3 on PATH, which holds torch, torchvision and numpy: call `python` as found, never a link to
# it, which loses that venv). Each step has its own time limit, so that one slow step leaves the others'
# results. The steps write into ${WORK:-a temporary folder}; at the end everything is packed into
# ${OUT:-results/gpu28}/gpu28.tgz (one file: the device tool brings back at most 8) beside a copy of the main
# benchmark JSON.
#
# Run 2026-11-27 at commit 9ab0ef7 on an H100 (its files: benchmark/fl/measured/, README there). Still to
# measure, and what this script now runs:
#   1. fl_train_bench: the FL round (per-client loop, kept-preprocessed loop, vectorised chunk 15) against
#      centralised training of SqueezeNet 1.1 at 224 px, fp32 with TF32 off (the throughput table's number) and
#      bf16: run again, so that two machines' spread is measured with the same script (it was -19% for the kept
#      loop on a second machine, benchmark/fl/measured/fl_train_bench_h100_layouts.jsonl).
#   2. share_mobilenet: fedbabu's other network, MobileNet on CIFAR-100 (384 of fedbabu's 513 trainings), has no
#      GPU rate: pfl_bench alone and 2 copies at once give native.h100.mobilenet_cifar and whether it shares.
#   3. share_pfl: 4convNet with 1, 2, 4 copies (measured 2.63 at 4; repeated for the spread).
# Afterwards (on the development machine): unpack gpu28.tgz, copy what is new into benchmark/fl/measured/, point
# throughput.yaml at it, add MobileNet to benchmark/gpu_slots.py SHARING_MODELS only if its gain is > 1.5 at 2
# copies, and record the numbers in docs/performance.md ("GPU economy, measured").
set -u
OUT="${OUT:-results/gpu28}"
WORK="${WORK:-$(mktemp -d)}"
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$WORK/gpu.csv" 2>&1
step() {  # step NAME SECONDS COMMAND...: run with a limit, log, keep going
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit} s) $(date -u +%T)"
    timeout "$limit" "$@" > "$WORK/$name.log" 2>&1
    echo "== $name: exit $? $(date -u +%T)"
    tail -n 12 "$WORK/$name.log"
}
step fl_train 200 python tools/fl_train_bench.py --out "$WORK/fl_train" --precisions fp32,bf16 \
    --modes loop,kept,vectorised --chunks 15 --rounds 2 --central-steps 6
step share_mobilenet 150 python tools/gpu_share_bench.py --out "$WORK/share_mobilenet" --copies 1,2 -- \
    python tools/pfl_bench.py --out '{out}' --model mobilenet_cifar --modes loop --rounds 2 --no-check
step share_pfl 120 python tools/gpu_share_bench.py --out "$WORK/share_pfl" --copies 1,2,4 -- \
    python tools/pfl_bench.py --out '{out}' --model 4convnet --modes loop --rounds 3 --no-check
tar czf "$OUT/gpu28.tgz" -C "$WORK" .
cp "$WORK/fl_train/fl_train_bench.json" "$OUT/" 2>/dev/null
ls -la "$OUT"
