#!/usr/bin/env bash
# test_thread_stack.sh BUILD SRC — kernels keep packed input panels in their own frame (a 7x7
# 1x1 conv with 2048 input channels and a remainder channel tile: two ~400 KB panels), so the
# runtime creates its threads with an explicit stack (RT_THREAD_STACK, runtime/rt_internal.h)
# instead of glibc's default, which is RLIMIT_STACK.  Under `ulimit -s 256` the model must
# still run (no crash), inference and training, 1 and 2 threads.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat >"$T/m.yml" <<'YML'
name: stack_probe
input: {shape: [2048, 7, 7], classes: 10}
layers:
  - {name: c1, op: conv, filters: 100, kernel: 1}
  - {name: r1, op: relu}
  - {name: c2, op: conv, filters: 2048, kernel: 1}
  - {name: p, op: global_avgpool}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 10}
YML
cnnc_as inference "$T/m.yml" --batch-size 2 -o "$T/m.so" && ok
cnnc_as training "$T/m.yml" --mode training --batch-size 2 -o "$T/t.so" && ok

for th in 1 2; do
  ( ulimit -s 256 && "$CNNRUN" "$T/m.so" benchmark --threads "$th" --runs 1 --batches 1 ) >"$T/l.out" 2>&1
  st=$?
  if [ "$st" = 0 ]; then ok; else bad "benchmark under ulimit -s 256, $th threads: exit $st $(tail -c 400 "$T/l.out")"; fi
  ( ulimit -s 256 && "$CNNRUN" "$T/t.so" train --dataset synthetic --limit 4 --epochs 1 --threads "$th" ) >"$T/t.out" 2>&1
  st=$?
  if [ "$st" = 0 ]; then ok; else bad "train under ulimit -s 256, $th threads: exit $st $(tail -c 400 "$T/t.out")"; fi
done
finish
