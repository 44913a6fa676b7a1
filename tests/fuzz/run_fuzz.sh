#!/usr/bin/env bash
# run_fuzz.sh [-t SECONDS] [-k] FUZZ_BUILD [BUILD] [HARNESS...] — runs each libFuzzer harness
# (tests/fuzz/fuzz_<h>.c: yaml onnx weights ckpt data so image tfrecord; default all) for SECONDS (default 20),
# one at a time, from the seeds (models/, tests/golden/{ok,err} for yaml; make_seeds.py's for
# the others, .so seeds compiled with BUILD/cnnc when BUILD is given) plus the regression
# corpus tests/fuzz/regress/<h>/ and the corpus kept in FUZZ_BUILD/fuzz-corpus/<h>/ by
# earlier runs.  FUZZ_BUILD is a build directory configured with
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DCNNC_FUZZ=ON
# and built with `ninja -C build-fuzz fuzz_all` (this script builds it if needed).
# Prints per harness the executions, exec/s and coverage; exits 1 if any harness found a
# crash, leak, timeout or out-of-memory, whose input is left in FUZZ_BUILD/fuzz-artifacts/<h>/
# (reproduce: FUZZ_BUILD/tests/fuzz/fuzz_<h> FILE; keep it as tests/fuzz/regress/<h>/NAME).
# -k: keep going after a finding (libFuzzer -fork is not used: runs are one process each).
set -u
SECS=20 KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    -t) SECS=$2; shift 2 ;;
    -k) KEEP=1; shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 2; }
FB=$(cd "$1" && pwd); shift
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD=""
if [ $# -gt 0 ] && [ -d "$1" ]; then BUILD=$(cd "$1" && pwd); shift; fi
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(yaml onnx weights ckpt data so image tfrecord)
ninja -C "$FB" fuzz_all >/dev/null || { echo "run_fuzz.sh: building $FB failed"; exit 1; }
SEEDS="$FB/fuzz-seeds"
rm -rf "$SEEDS"
python3 "$SRC/tests/fuzz/make_seeds.py" "$SEEDS" $BUILD || exit 1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
found=0
printf '%-8s %10s %8s %6s %6s  %s\n' harness execs exec/s cov corpus result
for h in "${HARNESSES[@]}"; do
  exe="$FB/tests/fuzz/fuzz_$h"
  [ -x "$exe" ] || { echo "run_fuzz.sh: no $exe"; found=1; continue; }
  corpus="$FB/fuzz-corpus/$h" art="$FB/fuzz-artifacts/$h"
  mkdir -p "$corpus" "$art"
  case $h in
    yaml) seeds=("$SRC/models" "$SRC/tests/golden/ok" "$SRC/tests/golden/err"); maxlen=16384
      tmo=30 ;; # a mutated zoo model (44 M parameters initialised) takes seconds under ASan
    ckpt) seeds=("$SEEDS/ckpt"); maxlen=70000 ;;
    so) seeds=("$SEEDS/so"); maxlen=65536 ;;
    *) seeds=("$SEEDS/$h"); maxlen=16384 ;;
  esac
  tmo=${tmo:-10}
  have=()
  for s in "${seeds[@]}" "$SRC/tests/fuzz/regress/$h"; do [ -d "$s" ] && have+=("$s"); done
  log="$FB/fuzz-$h.log"
  "$exe" "$corpus" "${have[@]}" -max_total_time="$SECS" -max_len=$maxlen -timeout=$tmo -rss_limit_mb=2560 \
    -malloc_limit_mb=2048 -artifact_prefix="$art/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  n=$(ls "$corpus" | wc -l)
  res=ok
  slow=$(ls "$art" | grep -c '^slow-unit-')
  [ "$slow" -gt 0 ] && echo "run_fuzz.sh: $h: $slow slow input(s) in $art (timing under ASan: check them in a normal build)"
  if [ $rc -ne 0 ] || ls "$art" | grep -v '^slow-unit-' | grep -q .; then
    res="FINDING (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|runtime error' "$log") -> $art"
    found=1
  fi
  printf '%-8s %10s %8s %6s %6s  %s\n' "$h" "${execs:-?}" "${eps:-?}" "${cov:-?}" "$n" "$res"
  [ $found -eq 1 ] && [ $KEEP -eq 0 ] && break
  unset tmo
done
exit $found
