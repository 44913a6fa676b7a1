# lib.sh — sourced by the shell test scripts: a temporary directory $T (removed on exit),
# pass/fail counters with ok / bad, `expect` for cnnrun exit statuses and messages, and
# `finish`, which prints the closing "N passed, M failed" line and sets the exit status;
# `need_fmnist` for the tests that train or validate on Fashion-MNIST; `skip_all` / `skip_part`
# for optional data or tools (exit 77 = SKIP_RETURN_CODE of the script tests, tests/CMakeLists.txt:
# ctest reports "Skipped", not "Passed", when something was not checked); `quick`: true under
# CNNC_TEST_QUICK=1 (tests/CMakeLists.txt CNNC_QUICK_TESTS; .ci/run's sanitizer stage), where a
# test may run fewer samples or cases.
# `code_of` / `same_code` compare the code of two --emit llvm / asm outputs (not their options).
# `script_args` reads the script's BUILD SRC arguments; the steps the tests repeat: `randn`
# (an input file), `cnnc_as` (a compile), `infer_as` / `same_infer` / `train_synth` (runs of a .so),
# `same_bytes` / `differ` (output and checkpoint comparisons), `run_ok` (a command that must
# succeed), `chromium_dom` (the headless rendering of a report), `loss_falls` (a training log).
# `PY` is the Python to run; the Python checkers the tests write import testlib.py (PYTHONPATH).
SKIP=77
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
skipped=0
ok() { pass=$((pass + 1)); }
quick() { [ -n "${CNNC_TEST_QUICK:-}" ] && [ "$CNNC_TEST_QUICK" != 0 ]; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# The Python checkers a test writes into $T import tests/scripts/testlib.py (Expect, close,
# so_info).
PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH

# PY: Debian's python3 (numpy, PyTorch) when it is there, else the python3 on PATH.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# script_args "$@": BUILD and SRC from the script's arguments (ctest gives the build and the
# source directory; a missing one exits with the usage line); CNNC and CNNRUN, the tools built.
script_args() {
  BUILD=${1:?usage: ${0##*/} BUILD SRC}
  SRC=${2:?usage: ${0##*/} BUILD SRC}
  CNNC="$BUILD/cnnc"
  CNNRUN="$BUILD/cnnrun"
}

# expect STATUS PATTERN -- ARGS...: $CNNRUN exits with STATUS and its stdout+stderr match PATTERN.
expect() {
  local want=$1 pat=$2
  shift 3
  "$CNNRUN" "$@" >"$T/out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    bad "cnnrun $* -> exit $got, want $want: $(head -c 600 "$T/out")"
  elif ! grep -qE -- "$pat" "$T/out"; then
    bad "cnnrun $* -> output lacks /$pat/: $(head -c 600 "$T/out")"
  else
    ok
  fi
}

# code_of FILE: cnnc's --emit llvm / asm output without the options record (the .so's options
# JSON names every tune knob's value, so two builds that differ in a knob differ there whatever
# their code); same_code A B: the two files hold the same code.  For the switch checks ("the
# knob changes the generated code").
code_of() { awk '/(\\22|\\")tune(\\22|\\"): \{/ { skip = 1; next } skip && /^[ \t]*\.size[ \t]/ { skip = 0; next } { skip = 0; print }' <"$1"; }
same_code() { cmp -s <(code_of "$1") <(code_of "$2"); }

# randn FILE SEED COUNT: COUNT little-endian f32 samples of N(0, 1) from Python's
# random.Random(SEED), a deterministic model input.
randn() {
  "$PY" -c '
import random, struct, sys
r, n = random.Random(int(sys.argv[2])), int(sys.argv[3])
open(sys.argv[1], "wb").write(struct.pack("<%df" % n, *[r.gauss(0, 1) for _ in range(n)]))' "$@" || bad "randn $*"
}

# cnnc_as NAME ARGS...: cnnc ARGS, its stdout and stderr in $T/NAME.log; when it fails, bad
# with the log's end and status 1 (callers that count a good compile add `&& ok`).
cnnc_as() {
  local n=$1
  shift
  "$CNNC" "$@" >"$T/$n.log" 2>&1 && return 0
  bad "cnnc $n: $(tail -c 400 "$T/$n.log")"
  return 1
}

# infer_as NAME INPUT ARGS...: cnnrun $T/NAME.so infer --input INPUT --output $T/NAME.y ARGS (its
# output in $T/NAME.ilog); when it fails, bad with the log's end and status 1.
infer_as() {
  local n=$1 x=$2
  shift 2
  "$CNNRUN" "$T/$n.so" infer --input "$x" --output "$T/$n.y" "$@" >"$T/$n.ilog" 2>&1 && return 0
  bad "infer $n: $(tail -c 400 "$T/$n.ilog")"
  return 1
}

# same_infer A B INPUT WHAT ARGS...: at 1 and at 2 threads, infer_as A and B on INPUT with ARGS;
# their outputs are the same bytes (same_bytes, else bad "WHAT (N threads)").
same_infer() {
  local th
  for th in 1 2; do
    infer_as "$1" "$3" "${@:5}" --threads $th && infer_as "$2" "$3" "${@:5}" --threads $th &&
      same_bytes "$T/$1.y" "$T/$2.y" "$4 ($th threads)"
  done
}

# train_synth SO DIR ARGS...: cnnrun SO train --dataset synthetic --epochs 1 ARGS, checkpoints
# in DIR, its output in DIR.log; when it fails, bad with the log's end and status 1.
train_synth() {
  local so=$1 dir=$2
  shift 2
  "$CNNRUN" "$so" train --dataset synthetic --epochs 1 "$@" --checkpoint-dir "$dir" >"$dir.log" 2>&1 && return 0
  bad "cnnrun $so train: $(tail -c 400 "$dir.log")"
  return 1
}

# ckpt DIR: the path of the one checkpoint in DIR (nothing when it holds none or several).
ckpt() {
  local f=("$1"/*.safetensors)
  [ ${#f[@]} = 1 ] && [ -e "${f[0]}" ] && echo "${f[0]}"
}

# same_bytes A B WHAT: A is a non-empty file with B's bytes (ok), else bad WHAT.
same_bytes() { if [ -s "$1" ] && cmp -s "$1" "$2"; then ok; else bad "$3"; fi; }
# differ A B WHAT: A is a non-empty file whose bytes B does not hold (ok: the comparison that
# must find them equal elsewhere can fail), else bad WHAT.
differ() { if [ -s "$1" ] && ! cmp -s "$1" "$2"; then ok; else bad "$3"; fi; }

# run_ok WHAT CMD...: CMD succeeds (ok; its stdout and stderr in $T/run.out), else bad WHAT with
# the output's start.
run_ok() {
  local what=$1
  shift
  if "$@" >"$T/run.out" 2>&1; then ok; else bad "$what: $(head -c 900 "$T/run.out")"; fi
}

# chromium_dom HTML OUT: headless $CHROMIUM (chromium_path) renders HTML; the DOM in OUT, its
# log in OUT.err.
chromium_dom() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --enable-logging=stderr --v=0 --dump-dom "file://$1" >"$2" 2>"$2.err"
}

# loss_falls LOG MINACC: the `cnnrun train` log LOG logs a loss that falls by more than 0.2 from
# the first log line to the last, and a validation accuracy above MINACC; prints the three and
# "ok", else "FAIL: ..." and status 1.
loss_falls() {
  awk -v minacc="$2" '
    /^epoch .*loss/ { for (i = 1; i <= NF; i++) if ($i == "loss") l = $(i + 1); if (first == "") first = l; last = l }
    /^validation:/ { for (i = 1; i <= NF; i++) if ($i == "accuracy") acc = $(i + 1) }
    END {
      if (first == "" || acc == "") { print "FAIL: no loss/validation lines"; exit 1 }
      printf "first loss %s, last loss %s, validation accuracy %s\n", first, last, acc
      if (last + 0 >= first - 0.2) { print "FAIL: the loss did not fall"; exit 1 }
      if (acc + 0 <= minacc) { print "FAIL: validation accuracy not above " minacc; exit 1 }
      print "ok"
    }' "$1"
}

# skip_all REASON: nothing can be checked (missing data or tool): print it and exit $SKIP.
skip_all() {
  echo "skip: $*"
  exit "$SKIP"
}

# skip_part REASON: a part of the checks cannot run (e.g. no chromium): counted, and `finish`
# then exits $SKIP instead of 0 when nothing failed.
skip_part() {
  skipped=$((skipped + 1))
  echo "skip: $*"
}

# finish: the closing line; status 1 when a check failed, else $SKIP when a part was skipped, else 0.
finish() {
  if [ "$skipped" = 0 ]; then echo "$pass passed, $fail failed"; else echo "$pass passed, $fail failed, $skipped skipped"; fi
  [ "$fail" = 0 ] || return 1
  [ "$skipped" = 0 ] || return "$SKIP"
}

# have_fmnist [train|t10k]: DATA = the Fashion-MNIST directory ($CNNC_FMNIST_DIR, default
# Debian's dataset-fashion-mnist); false when that split's images (plain or .gz) are not there.
have_fmnist() {
  DATA=${CNNC_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
  local split=${1:-train}
  [ -e "$DATA/$split-images-idx3-ubyte" ] || [ -e "$DATA/$split-images-idx3-ubyte.gz" ]
}
# need_fmnist [train|t10k]: as have_fmnist, and exits $SKIP ("skip: ...") when it is not there.
need_fmnist() {
  have_fmnist "$@" || skip_all "no Fashion-MNIST in $DATA (Debian dataset-fashion-mnist)"
}

# need_mpi: exits $SKIP without mpirun (Debian openmpi-bin) or $BUILD/libcnnrt_mpi.so; else
# lets Open MPI run as root and oversubscribe the 2 cores.
need_mpi() {
  command -v mpirun >/dev/null || skip_all "no mpirun (Debian openmpi-bin)"
  [ -e "$BUILD/libcnnrt_mpi.so" ] || skip_all "no $BUILD/libcnnrt_mpi.so (cnnc built without MPI: libopenmpi-dev)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
}

# chromium_path: the headless browser for the HTML checks ($CNNC_CHROMIUM, else chromium or
# chromium-browser on PATH); prints nothing when there is none.
chromium_path() {
  if [ -n "${CNNC_CHROMIUM+x}" ]; then
    [ -x "$CNNC_CHROMIUM" ] && echo "$CNNC_CHROMIUM"
    return 0
  fi
  command -v chromium || command -v chromium-browser || true
}
