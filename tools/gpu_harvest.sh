#!/usr/bin/env bash
# Run `flb harvest` on a lent GPU (the device tool's machine), with CIFAR-10 carried there in pieces, and bring its
# records back in the same call.
#
# Usage (on the device, from the repository root):  bash tools/gpu_harvest.sh BUDGET [ONLY-REGEX]
#
# The device tool sends at most 64 MiB a call, the working tree (about 17 MB) counted in, and CIFAR-10 is 176 MiB
# (139 MB as xz). Files outside the checkout, and ignored ones inside it, stay on the machine while it is warm (30 s
# after each call), so the data travels over several calls, one piece each, and the last call runs this script:
#
#   here:   tar cf - -C "$FLB_DATA_ROOT" MANIFEST.sha256 cifar-10-batches-py | xz -T2 -6 | split -b 34M - .gpudata/part-
#           (.gpudata/ and .whl/ listed in .git/info/exclude; .whl/ holds the wheels the image lacks, for
#           Python 3.12: jsonschema, referencing, rpds-py, jsonschema-specifications). A 47 MiB piece with the
#           tree was refused as over the limit (2026-11-27); a plain tar in pieces works too
#   calls 1..3:  carry [.gpudata/part-aa] (then -ab, -ac); command: mkdir -p $HOME/flbchunks && mv .gpudata/part-* $HOME/flbchunks/
#   call 4:      carry [.gpudata/part-ad, .whl]; command: WORKERS=16 bash tools/gpu_harvest.sh 500s
#
# What the first try (2026-11-27, an H200) taught, and this script now does:
#   * Every call copies the working tree again, and a file the last call wrote inside the checkout where git does
#     not ignore it (a new record under runs/) is gone: the ledger lives outside the checkout ($LEDGER, a copy of
#     runs/ made once per machine), and the new records leave in the call that made them.
#   * At most 8 files of 16 MiB, 64 MiB in all, come back: the records and unit logs go in one small archive,
#     records.tgz, beside harvest.log; the parked checkpoints of stopped trainings (a Ditto checkpoint holds 100
#     personal models, 47 MB) come back in 15 MiB pieces, parked.tgz.part-*, up to 3 of them, or stay behind with
#     a line in harvest.log saying so.
#   * A checkpoint parked on a CPU resumes on the GPU with the executor it was started with
#     (benchmark/pfl/executor.py resumed_choice); before that rule the GPU refused it.
#
# The loader checks every CIFAR-10 file against MANIFEST.sha256 before reading it, so a piece lost or garbled on the
# way is an error, never a silently different dataset. The harvest runs the fedbabu targets' units matching the regex
# with $WORKERS workers (default 8; 4convNet jobs share one GPU: benchmark/gpu_slots.py) and stops at the budget,
# parking what is unfinished; SEEDS=1 plans seed 1 instead of each spec's seeds (flb harvest --seeds). On an H200,
# 4 workers finished a unit in about 2 min each and 16 in 5 to 7 min (docs/runs/h200_harvest2, h200_harvest3,
# h200_harvest4: 13 units in 812 s of device time): more workers give more units per minute, but a unit stopped at the
# budget loses its work when its checkpoint is too large to come back (Ditto's: 47 MB). At the budget each training
# ends its round and checkpoints there within --grace 30s (a GPU round takes seconds; the call's limit leaves no
# room for the default 5 min). On the development machine: unpack records.tgz (and the parked pieces: cat parked.tgz.part-* | tar xz)
# in the repository root, then `flb runs verify` (docs/ledger.md).
#
# Ditto needs its own plan. Its checkpoint holds one personal model per client touched so far (38 to 45 MiB past a
# third of the rounds), so a Ditto unit stopped at the budget can never come back: it must finish inside one call.
# On an H200 with 9 Ditto units at once (WORKERS=9, 2026-11-28, docs/runs/h200_harvest5) each ran at 0.36 rounds/s
# at tau = 1 and reached 55% of its rounds in 495 s: about 15 min a unit, longer than a call's 10 min, and all 495 s
# were lost (the machine went back before a second call could resume them). Together they ran about 0.6 Ditto
# units per minute, and earlier harvests gave about the same summed rate with 4 and 16 workers (h200_harvest3 and
# 4), so run Ditto alone with WORKERS=4 and a budget of about 420 s (four units finish, the fifth starts late and is
# lost), then the next four in the next call.
#
# DEVICE=cpu with FLB_DATA_ROOT set runs the same steps on a machine without a GPU (a smoke test of the packing).
set -u
BUDGET="${1:?budget, e.g. 8m}"
ONLY="${2:-cifar10/4convnet.*/f0\.1-}"
DEVICE="${DEVICE:-cuda}"
WORKERS="${WORKERS:-8}"
SEEDS="${SEEDS:-}"  # e.g. SEEDS=1: a second seed of the cells one seed cannot decide (flb harvest --seeds)
OUT="${OUT:-results/gpu_harvest}"
CHUNKS="${CHUNKS:-$HOME/flbchunks}"
LEDGER="${LEDGER:-$HOME/flbledger}"
mkdir -p "$OUT"
if compgen -G ".gpudata/part-*" > /dev/null; then mkdir -p "$CHUNKS" && mv .gpudata/part-* "$CHUNKS"/; fi
# the pieces make a tar, plain or xz-compressed (told apart by xz's magic bytes)
UNXZ='import lzma, shutil, sys
i = sys.stdin.buffer
shutil.copyfileobj(lzma.open(i) if i.peek(6)[:6] == b"\xfd7zXZ\x00" else i, sys.stdout.buffer)'
if compgen -G "$CHUNKS/part-*" > /dev/null; then
    export FLB_DATA_ROOT="${DATA:-$HOME/flbdata}"
    mkdir -p "$FLB_DATA_ROOT"
    [ -f "$FLB_DATA_ROOT/cifar-10-batches-py/test_batch" ] || cat "$CHUNKS"/part-* | python3 -c "$UNXZ" | tar xf - -C "$FLB_DATA_ROOT" \
        || { echo "gpu_harvest: the data pieces in $CHUNKS do not make a whole tar"; exit 1; }
fi
: "${FLB_DATA_ROOT:?no data: carry the pieces (see the head of this script) or set FLB_DATA_ROOT}"
SITE="$HOME/flb-site"
if ! python3 -c "import jsonschema" 2> /dev/null && compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        .whl/*.whl || { echo "gpu_harvest: the wheels in .whl/ did not install"; exit 1; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" FLB_CACHE_DIR="${FLB_CACHE_DIR:-$HOME/flbcache}" PYTHONUNBUFFERED=1
export FLB_WEIGHTS_DIR="${FLB_WEIGHTS_DIR:-$HOME/flbweights}"
mkdir -p "$FLB_CACHE_DIR" "$FLB_WEIGHTS_DIR"
[ -d "$LEDGER" ] || cp -a runs "$LEDGER"
LOG="$OUT/harvest.log"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG"
MARK=$(mktemp)
TARGETS=$(python3 -c "from benchmark.tables.spec import list_specs; print(' '.join(s for s in list_specs() if 'babu' in s))")
# shellcheck disable=SC2086
python3 -m benchmark.cli harvest --device "$DEVICE" --budget "$BUDGET" --grace 30s --workers "$WORKERS" --targets $TARGETS \
    --only "$ONLY" --out "$LEDGER" ${SEEDS:+--seeds $SEEDS} >> "$LOG" 2>&1
echo "gpu_harvest: harvest exit $?" | tee -a "$LOG"
tail -c 3000 "$LOG"
# what this call added to the ledger (the records; the parked checkpoints apart), and the harvest's unit logs:
# at most 8 files of 16 MiB, 64 MiB in all, come back
NEW=$(mktemp) PARKED=$(mktemp)
(cd "$LEDGER" && find . -path ./parked -prune -o -type f -newer "$MARK" -print) > "$NEW"
(cd "$LEDGER" && find ./parked -type f -newer "$MARK" 2>/dev/null) > "$PARKED"
# shellcheck disable=SC2046
tar czf "$OUT/records.tgz" --transform 's,^\./,runs/,' -C "$LEDGER" -T "$NEW" \
    -C "$PWD" $(find results/harvest -type f -newer "$MARK" 2>/dev/null)
{ echo "== new records:"; cat "$NEW"; echo "== parked:"; cat "$PARKED"; } >> "$LOG"
# a checkpoint over 15 MiB (Ditto's 100 personal models) cannot come back: leave it, so the small ones still do
BIG=$(mktemp)
(cd "$LEDGER" && while read -r f; do [ "$(stat -c %s "$f")" -gt $((15 * 1024 * 1024)) ] && echo "$f"; done < "$PARKED") > "$BIG"
if [ -s "$BIG" ]; then
    echo "left behind (over 15 MiB each): $(tr '\n' ' ' < "$BIG")" | tee -a "$LOG"
    grep -vxF -f "$BIG" "$PARKED" > "$PARKED.small"; mv "$PARKED.small" "$PARKED"
fi
rm -f "$BIG"
if [ -s "$PARKED" ]; then
    PACK=$(mktemp)
    tar czf "$PACK" --transform 's,^\./,runs/,' -C "$LEDGER" -T "$PARKED"
    if [ "$(stat -c %s "$PACK")" -le $((3 * 15 * 1024 * 1024)) ]; then
        split -b 15M "$PACK" "$OUT/parked.tgz.part-"
    else
        echo "left behind: $(stat -c %s "$PACK") bytes of parked checkpoints (over 45 MiB)" | tee -a "$LOG"
    fi
    rm -f "$PACK"
fi
rm -f "$MARK" "$NEW" "$PARKED"
ls -la "$OUT"
