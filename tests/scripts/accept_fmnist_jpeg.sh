#!/bin/bash
# accept_fmnist_jpeg.sh BUILD SRC — issue 23's acceptance on image files (ctest
# test_accept_fmnist_jpeg, label "long": runs only with CNNC_RUN_LONG=1, else skips with 77;
# 10 to 25 minutes on 2 cores, by load): all of Fashion-MNIST written as a JPEG folder
# (tests/scripts/make_jpeg_folder.py: 60000 train, 10000 val images, quality 100) trains
# fmnist_cnn through `cnnrun train --dataset folder` for 3 epochs to at least 90 % validation
# accuracy, and to within 1.5 points of the idx files trained with the same recipe (the folder's
# order differs: class by class, then the same shuffle).  Recipe: the training defaults
# (momentum 0.9, batch 64, lr 0.05, --seed 1) with a cosine lr schedule after a 0.1-epoch
# warmup, --augment none (the images are already 28x28).  Prints both accuracies.  (The
# defaults alone, constant lr, reach 88-89 %; quality 90 JPEGs lose about 1.5 points to their
# compression; without the warmup one run of this recipe diverged at the start: bench/RESULTS.md.)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
script_args "$@"
if [ "${CNNC_RUN_LONG:-0}" != 1 ]; then
  echo "skip: the 3-epoch JPEG-folder acceptance runs only with CNNC_RUN_LONG=1"
  exit 77
fi
need_fmnist train
need_fmnist t10k
run_ok "make the JPEG folder" "$PY" "$SRC/tests/scripts/make_jpeg_folder.py" "$T/fmj" --fmnist "$DATA" --limit-per-class 7000 \
  --quality 100
if grep -q '"train": 60000, "val": 10000' "$T/run.out"; then ok; else bad "folder: $(cat "$T/run.out")"; fi
run_ok "compile" "$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training -o "$T/f.so"
recipe=(--epochs 3 --lr 0.05 --lr-schedule cosine --warmup-epochs 0.1 --seed 1)
val_acc() { sed -n 's/^validation: loss [0-9.]*  accuracy \([0-9.]*\).*(10000 test images.*/\1/p' "$1"; }
"$CNNRUN" "$T/f.so" train --dataset folder --data-dir "$T/fmj" --augment none "${recipe[@]}" 2>&1 | tee "$T/log"
"$CNNRUN" "$T/f.so" train --dataset fashion-mnist --data-dir "$DATA" "${recipe[@]}" 2>&1 | tee "$T/idx.log"
acc=$(val_acc "$T/log") idx=$(val_acc "$T/idx.log")
echo "3 epochs: JPEG folder validation accuracy ${acc:-none}, idx files ${idx:-none}"
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }'; then ok; else bad "accuracy ${acc:-none} < 0.90"; fi
if [ -n "$acc" ] && [ -n "$idx" ] && awk -v a="$acc" -v b="$idx" 'BEGIN { exit !(a >= b - 0.015) }'; then ok
else bad "folder ${acc:-none} more than 1.5 points below the idx files' ${idx:-none}"; fi
finish
