#!/usr/bin/env bash
# test_mpi_train.sh BUILD SRC — data-parallel training across processes (docs/mpi.md):
# `mpirun -np 2 cnnrun X.so train` of a model compiled --replicas 2 (one replica per rank)
# writes checkpoints byte-identical to one process running both replicas, logs the same global
# loss and the same (split, reduced) validation: fmnist_cnn (no batch norm) and cifar_resnet8
# (batch-norm running statistics passed rank to rank after each rank's forwards; also 2
# replicas per rank with gradient accumulation), fmnist_cnn's 4 replicas on their own threads
# (--replica-mode parallel: a rank's groups and frames for its replicas alone) on synthetic data, fmnist_cnn on
# Fashion-MNIST (--limit), --mixup/--cutmix with accumulation 2; ranks with other .so files or
# options stop with a message; a killed rank ends the job within seconds, a stopped one (SIGSTOP)
# within --comm-timeout plus a few seconds; --restore is read by rank 0 and broadcast.  Skips (77) without
# mpirun or libcnnrt_mpi.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
need_mpi
MPI=(timeout 300 mpirun --oversubscribe -np 2)

# same_run NAME SO ARGS...: one process vs 2 ranks, same checkpoints (cmp) and log lines.
same_run() {
  local name=$1 so=$2
  shift 2
  rm -rf "$T/one" "$T/two"
  "$CNNRUN" "$so" train --threads 1 --json --checkpoint-dir "$T/one" "$@" >"$T/one.log" 2>&1 ||
    { bad "$name: one process failed: $(tail -3 "$T/one.log")"; return; }
  "${MPI[@]}" "$CNNRUN" "$so" train --threads 1 --json --checkpoint-dir "$T/two" "$@" >"$T/two.log" 2>&1 ||
    { bad "$name: mpirun -np 2 failed: $(tail -5 "$T/two.log")"; return; }
  local n=0 f
  for f in "$T"/one/*.safetensors; do
    n=$((n + 1))
    cmp -s "$f" "$T/two/${f##*/}" || { bad "$name: ${f##*/} differs between 1 process and 2 ranks"; return; }
  done
  [ "$n" -gt 0 ] || { bad "$name: no checkpoints"; return; }
  [ "$(ls "$T/two" | wc -l)" = "$n" ] || { bad "$name: 2 ranks wrote other checkpoints: $(ls "$T/two")"; return; }
  # the global loss / accuracy and the validation, without the timings
  strip() { grep -E '"event": "(log|validation)"' "$1" | sed -E 's/, "(images_per_second|train_seconds)": [0-9.]+//g'; }
  [ "$(strip "$T/one.log")" = "$(strip "$T/two.log")" ] && ok || bad "$name: logs differ: $(strip "$T/one.log") vs $(strip "$T/two.log")"
}

"$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --batch-size 8 --replicas 2 -o "$T/f2.so" >"$T/c.log" 2>&1 || bad "cnnc fmnist_cnn: $(tail -3 "$T/c.log")"
"$CNNC" "$SRC/models/cifar_resnet8.yml" --mode training --batch-size 4 --replicas 2 -o "$T/r2.so" >"$T/c.log" 2>&1 || bad "cnnc cifar_resnet8: $(tail -3 "$T/c.log")"

same_run "fmnist_cnn synthetic" "$T/f2.so" --dataset synthetic --epochs 2 --limit 256 --logs-per-epoch 2
same_run "cifar_resnet8 synthetic (batch norm)" "$T/r2.so" --dataset synthetic --epochs 1 --limit 128 --logs-per-epoch 2
# 2 replicas per rank x 2 accumulated micro-batches: the statistics are passed on after the
# rank's last forward job, backward jobs of earlier micro-batches before it
"$CNNC" "$SRC/models/cifar_resnet8.yml" --mode training --batch-size 4 --replicas 4 --gradient-accumulation 2 -o "$T/r4.so" >"$T/c.log" 2>&1 || bad "cnnc cifar_resnet8 r4: $(tail -3 "$T/c.log")"
same_run "cifar_resnet8 4 replicas, accumulation 2 (batch norm)" "$T/r4.so" --dataset synthetic --epochs 1 --limit 256 --logs-per-epoch 2
# replicas on their own threads (--replica-mode parallel, no batch norm): each rank starts the
# thread groups and frames of its 2 replicas only, indexed from its first (rank 1: replicas 2, 3)
"$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --batch-size 8 --replicas 4 -o "$T/f4.so" >"$T/c.log" 2>&1 || bad "cnnc fmnist_cnn r4: $(tail -3 "$T/c.log")"
same_run "fmnist_cnn 4 replicas, --replica-mode parallel" "$T/f4.so" --dataset synthetic --epochs 1 --limit 256 --logs-per-epoch 2 \
  --replica-mode parallel
# --mixup / --cutmix: each micro-batch's draws follow its number in the run, the same on 2 ranks
"$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --batch-size 8 --replicas 2 --gradient-accumulation 2 --mixed-labels \
  -o "$T/fm.so" >"$T/c.log" 2>&1 || bad "cnnc fmnist_cnn --mixed-labels: $(tail -3 "$T/c.log")"
same_run "fmnist_cnn mixup + cutmix" "$T/fm.so" --dataset synthetic --epochs 1 --limit 256 --logs-per-epoch 2 \
  --mixup 0.4 --cutmix 1.0 --seed 3
if have_fmnist; then
  same_run "fmnist_cnn Fashion-MNIST" "$T/f2.so" --dataset fashion-mnist --epochs 1 --limit 512 --data-dir "$DATA"
  # --restore on every rank continues as one process does
  ck=$(ls "$T"/one/*.safetensors | head -1)
  cp "$ck" "$T/start.safetensors"
  same_run "fmnist_cnn --restore" "$T/f2.so" --dataset fashion-mnist --epochs 2 --limit 512 --data-dir "$DATA" --restore "$T/start.safetensors"
else
  skip_part "no Fashion-MNIST in $DATA"
fi

# --restore under mpirun: only rank 0 reads the file (here only rank 0's working directory has
# it) and broadcasts the state; the checkpoints match one process restoring the same file
rm -rf "$T/one" "$T/two" "$T/rr0" "$T/rr1" && mkdir -p "$T/rr0" "$T/rr1"
"$CNNRUN" "$T/r2.so" train --threads 1 --dataset synthetic --epochs 1 --limit 64 --no-validation --checkpoint-dir "$T/one" >"$T/one.log" 2>&1 ||
  bad "cifar_resnet8 first run: $(tail -3 "$T/one.log")"
cp "$(ls "$T"/one/*.safetensors | tail -1)" "$T/rr0/start.safetensors"
cp "$T/rr0/start.safetensors" "$T/start_rr.safetensors"
rm -rf "$T/one"
"$CNNRUN" "$T/r2.so" train --threads 1 --dataset synthetic --epochs 2 --limit 64 --no-validation --logs-per-epoch 2 \
  --restore "$T/start_rr.safetensors" --checkpoint-dir "$T/one" >"$T/one.log" 2>&1 || bad "restore, one process: $(tail -3 "$T/one.log")"
"${MPI[@]}" bash -c 'cd "$2/rr$OMPI_COMM_WORLD_RANK" && exec "$0" "$1" train --threads 1 --dataset synthetic --epochs 2 --limit 64 \
  --no-validation --logs-per-epoch 2 --restore start.safetensors --checkpoint-dir "$2/two"' "$CNNRUN" "$T/r2.so" "$T" >"$T/two.log" 2>&1 ||
  bad "restore read by rank 0: $(grep -v '^step' "$T/two.log" | tail -5)"
n=0
for f in "$T"/one/*.safetensors; do
  [ -e "$f" ] || break
  n=$((n + 1))
  cmp -s "$f" "$T/two/${f##*/}" || { bad "restore read by rank 0: ${f##*/} differs from one process"; n=-99; }
done
[ "$n" -gt 0 ] && ok || [ "$n" -lt 0 ] || bad "restore read by rank 0: no checkpoints"
# a corrupt --restore file: one message on every rank, every rank ends (no hang, no MPI_Abort)
head -c 1000 "$T/start_rr.safetensors" >"$T/rr0/start.safetensors"
timeout 60 mpirun --oversubscribe -np 2 bash -c 'cd "$2/rr$OMPI_COMM_WORLD_RANK" && exec "$0" "$1" train --threads 1 --dataset synthetic \
  --epochs 2 --limit 64 --no-validation --restore start.safetensors' "$CNNRUN" "$T/r2.so" "$T" >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$(grep -c '^\[rank [01] of 2\] cnnrun: --restore (read by rank 0): start.safetensors' "$T/out")" = 2 ] &&
  ! grep -q MPI_ABORT "$T/out" && ok || bad "corrupt --restore: rc $rc: $(head -5 "$T/out")"

# ---- faults: other .so / options on a rank; a rank that dies ----------------------------------

timeout 60 mpirun --oversubscribe -np 1 "$CNNRUN" "$T/f2.so" train --dataset synthetic --no-validation : \
  -np 1 "$CNNRUN" "$T/r2.so" train --dataset synthetic --no-validation >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "rank 1 runs another model file than rank 0" "$T/out" && ok || bad "other .so: rc $rc: $(head -5 "$T/out")"
timeout 60 mpirun --oversubscribe -np 1 "$CNNRUN" "$T/f2.so" train --dataset synthetic --no-validation : \
  -np 1 "$CNNRUN" "$T/f2.so" train --dataset synthetic --no-validation --lr 0.1 >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "rank 1 was started with other options than rank 0" "$T/out" && ok || bad "other options: rc $rc: $(head -5 "$T/out")"
# a rank failing alone (the same relative --data-dir, missing in its working directory) ends
# every rank (MPI_Abort), no hang
mkdir -p "$T/r0/d" "$T/r1"
# rank 0's data is whole (64 samples, 4 updates): only rank 1 fails, rank 0 waits for it in the exchange
"$PY" -c "import sys; sys.stdout.buffer.write(bytes([0,0,8,3,0,0,0,64,0,0,0,28,0,0,0,28]) + bytes(64 * 784))" >"$T/r0/d/train-images-idx3-ubyte"
"$PY" -c "import sys; sys.stdout.buffer.write(bytes([0,0,8,1,0,0,0,64]) + bytes(k % 10 for k in range(64)))" >"$T/r0/d/train-labels-idx1-ubyte"
timeout 60 mpirun --oversubscribe -np 2 bash -c 'cd "$2/r$OMPI_COMM_WORLD_RANK" &&
  exec "$0" "$1" train --dataset mnist --data-dir d --no-validation' "$(cd "$(dirname "$CNNRUN")" && pwd)/cnnrun" "$T/f2.so" "$T" >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "\[rank 1 of 2\] cnnrun: d/train-images-idx3-ubyte: cannot open" "$T/out" && ok || bad "one rank failing: rc $rc: $(head -5 "$T/out")"
# a killed rank: mpirun ends the others
timeout 120 mpirun --oversubscribe -np 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 3; kill -9 $$) & fi;
  exec "$0" "$1" train --dataset synthetic --epochs 50 --no-validation --threads 1' "$CNNRUN" "$T/f2.so" >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qi "signal 9\|killed" "$T/out" && ok || bad "killed rank: rc $rc: $(tail -5 "$T/out")"
# a rank alive but stuck (SIGSTOP): the other's call times out (--comm-timeout 3), names the
# silent rank and ends every rank (MPI_Abort ends the stopped one too), well within 60 s
t0=$(date +%s)
timeout 60 mpirun --oversubscribe -np 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 3; kill -STOP $$) & fi;
  exec "$0" "$1" train --dataset synthetic --epochs 50 --no-validation --threads 1 --comm-timeout 3' "$CNNRUN" "$T/f2.so" >"$T/out" 2>&1
rc=$? dt=$(($(date +%s) - t0))
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$dt" -lt 40 ] &&
  grep -q "\[rank 0 of 2\] cnnrun: .*MPI_Allgather: no answer within 3 s (--comm-timeout); rank 1 did not answer" "$T/out" && ok ||
  bad "stopped rank: rc $rc after ${dt} s: $(grep -v '^step' "$T/out" | head -5)"
# the same with batch norm, rank 0 stopped: rank 1 waits for its statistics
timeout 60 mpirun --oversubscribe -np 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then (sleep 3; kill -STOP $$) & fi;
  exec "$0" "$1" train --dataset synthetic --epochs 50 --no-validation --threads 1 --comm-timeout 3' "$CNNRUN" "$T/r2.so" >"$T/out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "\[rank 1 of 2\] cnnrun: .*no answer within 3 s (--comm-timeout); rank 0 did not answer" "$T/out" && ok ||
  bad "stopped rank 0 (batch norm): rc $rc: $(grep -v '^step' "$T/out" | head -5)"
finish
