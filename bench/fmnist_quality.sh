#!/bin/sh
# fmnist_quality.sh BUILD SIDE SEED... — issue 23's training-quality runs, one per seed, sequential,
# nice, printing one line "SIDE seed S: ACC %" per run (full logs in $OUT, default /tmp/fmnist_quality).
#
#   cnnc    cnnc's defaults: `cnnc models/fmnist_cnn.yml --mode training --seed S` (momentum 0.9,
#           batch 64) and `cnnrun train --dataset fashion-mnist --epochs 3 --seed 10S+1` (lr 0.05 by default)
#           (cnnrun's seed 0 is file order, and epoch e shuffles with seed + e: seeds 10 apart share
#           no permutation)
#   torch   the anchor (../shared/anchors/fmnist_torch.py) with torch.manual_seed(S): tools/fmnist_xinit.py
#           train --seed S --epochs 3 (a copy of the anchor's loop; ~31 min per run at 96 img/s on the
#           2-core Xeon, quiet)
#   draws   cnnc's training on the anchor's own random draws: torch.manual_seed(S)'s initial weights
#           (fmnist_xinit.py torch2ckpt) and its 3 epochs of randperm order (fmnist_order.py order),
#           read in file order — the anchor's run computed by cnnc, at cnnc's speed
#
# THREADS (default 2) is cnnrun's --threads: results are bitwise the same for any count.
set -eu
BUILD=$1 SIDE=$2
shift 2
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/fmnist_quality}
TH=${THREADS:-2}
PY=/usr/bin/python3
mkdir -p "$OUT"
acc() { sed -n 's/^validation: .*accuracy \([0-9.]*\) .*/\1/p' "$1" | awk '{printf "%.2f", $1 * 100}'; }
for s in "$@"; do
  log=$OUT/$SIDE-$s.log
  case $SIDE in
  cnnc)
    nice "$BUILD/cnnc" "$SRC/models/fmnist_cnn.yml" --mode training --seed "$s" -o "$OUT/f$s.so"
    nice "$BUILD/cnnrun" "$OUT/f$s.so" train --dataset fashion-mnist --epochs 3 --seed $((10 * s + 1)) \
      --validate-every 1 --threads "$TH" >"$log" 2>&1
    echo "cnnc seed $s/$((10 * s + 1)): $(acc "$log") %" ;;
  torch)
    nice $PY "$SRC/tools/fmnist_xinit.py" train --seed "$s" --epochs 3 --threads 2 >"$log" 2>&1
    echo "torch seed $s: $(sed -n 's/^epoch 3: .*test accuracy \([0-9.]*\)%/\1/p' "$log") %" ;;
  draws)
    [ -f "$OUT/f0.so" ] || nice "$BUILD/cnnc" "$SRC/models/fmnist_cnn.yml" --mode training -o "$OUT/f0.so"
    [ -d "$OUT/tmpl" ] || nice "$BUILD/cnnrun" "$OUT/f0.so" train --limit 64 --lr 0 --no-validation --threads "$TH" \
      --checkpoint-dir "$OUT/tmpl" >/dev/null
    nice $PY "$SRC/tools/fmnist_xinit.py" torch2ckpt --template "$OUT"/tmpl/ckpt-step-*.safetensors --seed "$s" \
      -o "$OUT/t$s.safetensors" >/dev/null
    [ -d "$OUT/ord$s" ] || nice $PY "$SRC/tools/fmnist_order.py" order --seed "$s" --epochs 3 -o "$OUT/ord$s" >/dev/null
    nice "$BUILD/cnnrun" "$OUT/f0.so" train --dataset fashion-mnist --data-dir "$OUT/ord$s" --seed 0 \
      --restore "$OUT/t$s.safetensors" --epochs 1 --threads "$TH" >"$log" 2>&1
    echo "draws seed $s: $(acc "$log") %" ;;
  *) echo "usage: $0 BUILD cnnc|torch|draws SEED..." >&2; exit 2 ;;
  esac
done
