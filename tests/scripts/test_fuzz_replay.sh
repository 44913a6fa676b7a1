#!/usr/bin/env bash
# test_fuzz_replay.sh BUILD SRC — replays every fuzz harness (tests/fuzz/fuzz_<h>.c, built
# without libFuzzer as BUILD/tests/fuzz/replay_<h>) over its regression corpus
# tests/fuzz/regress/<h>/ (each file an input that once crashed a reader: it must not now)
# and over the seeds of tests/fuzz/make_seeds.py (yaml: models/ and tests/golden/{ok,err}).
# A crash, abort or sanitizer report (CI runs this under ASan + UBSan too) fails the case.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
R="$SRC/tests/fuzz/regress"
"$PY" "$SRC/tests/fuzz/make_seeds.py" "$T/seeds" "$BUILD" >"$T/out" 2>&1 || bad "make_seeds.py: $(tail -3 "$T/out")"
for h in yaml onnx weights ckpt data so image tfrecord; do
  exe="$BUILD/tests/fuzz/replay_$h"
  [ -x "$exe" ] || { bad "no $exe"; continue; }
  case $h in
    yaml) seeds=("$SRC/models" "$SRC/tests/golden/ok" "$SRC/tests/golden/err") ;;
    *) seeds=("$T/seeds/$h") ;;
  esac
  args=()
  for d in "$R/$h" "${seeds[@]}"; do [ -d "$d" ] && args+=("$d"); done
  "$exe" "${args[@]}" >"$T/out" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    bad "replay_$h exit $rc: $(grep -m3 -E 'ERROR|runtime error|SUMMARY|replay:|Abort|fault' "$T/out")"
  elif grep -qE "Sanitizer|runtime error:" "$T/out"; then
    bad "replay_$h: sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$T/out")"
  elif ! grep -qE '^[1-9][0-9]* passed, 0 failed' "$T/out"; then
    bad "replay_$h replayed nothing: $(tail -2 "$T/out")"
  else
    ok
  fi
done
finish
