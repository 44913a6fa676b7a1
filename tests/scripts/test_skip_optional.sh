#!/usr/bin/env bash
# test_skip_optional.sh BUILD SRC — the tests that need optional data or tools report SKIP to
# ctest (exit 77 = SKIP_RETURN_CODE of the script tests, tests/CMakeLists.txt) when it is
# missing, instead of passing: run here with Fashion-MNIST hidden ($CNNC_FMNIST_DIR pointing at
# an empty directory), PyTorch hidden (a `torch` package on PYTHONPATH whose import fails) and
# chromium hidden ($CNNC_CHROMIUM pointing at nothing), each must exit 77 and print "skip:".
# Tests that skip only part of their checks (test_cnnrun_train without the dataset, test_report*
# without chromium) take minutes: run with CNNC_RUN_LONG=1.  Also: lib.sh's finish (1 on a
# failure even with skipped parts, 77 with only skipped parts, 0 otherwise), and that a present
# dataset is found.
set -u
BUILD=${1:?usage: test_skip_optional.sh BUILD SRC}
SRC=${2:?usage: test_skip_optional.sh BUILD SRC}
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
S="$SRC/tests/scripts"
mkdir -p "$T/nofmnist" "$T/notorch/torch"
echo 'raise ImportError("torch hidden by test_skip_optional.sh")' >"$T/notorch/torch/__init__.py"

# want_skip NAME ENV... -- CMD...: CMD (run with ENV) exits 77 and prints "skip:".
want_skip() {
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local t0=$SECONDS
  env "${envs[@]}" "$@" >"$T/out" 2>&1
  local rc=$?
  if [ $rc = 77 ] && grep -q "^skip: " "$T/out"; then ok
  else bad "$name: exit $rc, want 77 with a 'skip:' line: $(tail -c 400 "$T/out")"; fi
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -m1 '^skip: ' "$T/out")"
}

# ---- Fashion-MNIST missing ------------------------------------------------------------------
NOF=CNNC_FMNIST_DIR="$T/nofmnist"
want_skip test_fmnist_order "$NOF" -- "$PY" "$S/test_fmnist_order.py" "$BUILD" "$SRC"
want_skip test_fmnist_xinit "$NOF" -- "$PY" "$S/test_fmnist_xinit.py" "$BUILD" "$SRC"
want_skip test_train_fmnist "$NOF" -- bash "$S/test_train_fmnist.sh" "$BUILD" "$SRC"
want_skip test_train_bn_cnnrun "$NOF" -- bash "$S/test_train_bn_cnnrun.sh" "$BUILD" "$SRC"
want_skip test_cnnrun_validate_pad "$NOF" -- bash "$S/test_cnnrun_validate_pad.sh" "$BUILD" "$SRC"
want_skip "test_train_fmnist_precision (long)" CNNC_RUN_LONG=1 "$NOF" -- bash "$S/test_train_fmnist_precision.sh" "$BUILD" "$SRC"
# only the test split missing
mkdir -p "$T/trainonly" && touch "$T/trainonly/train-images-idx3-ubyte.gz"
want_skip "test_train_bn_cnnrun (no t10k)" CNNC_FMNIST_DIR="$T/trainonly" -- bash "$S/test_train_bn_cnnrun.sh" "$BUILD" "$SRC"

# ---- long checks not asked for ------------------------------------------------------------
want_skip "test_train_fmnist_full (long)" CNNC_RUN_LONG=0 CNNC_TRAIN_FULL=1 -- bash "$S/test_train_fmnist.sh" "$BUILD" "$SRC"
want_skip "test_train_fmnist_precision" CNNC_RUN_LONG=0 -- bash "$S/test_train_fmnist_precision.sh" "$BUILD" "$SRC"

# ---- PyTorch missing ------------------------------------------------------------------------
NOT=PYTHONPATH="$T/notorch"
[ -n "$(env "$NOT" "$PY" -c 'import torch' 2>&1 | grep 'hidden by')" ] && ok ||
  bad "the torch stand-in does not hide PyTorch"
for t in test_ref_vs_torch test_round16_torch test_torch_parity test_train_gconv_torch test_train_torch test_zoo_summary \
  test_fmnist_order test_fmnist_xinit; do
  want_skip "$t (no torch)" "$NOT" -- "$PY" "$S/$t.py" "$BUILD" "$SRC"
done

# ---- partly skipped: the other checks run and pass, then 77 (minutes of CPU: CNNC_RUN_LONG=1) --
if [ "${CNNC_RUN_LONG:-0}" = 1 ]; then
  want_skip "test_cnnrun_train (no Fashion-MNIST)" "$NOF" -- bash "$S/test_cnnrun_train.sh" "$BUILD" "$SRC"
  grep -qE "^[1-9][0-9]* passed, 0 failed, 1 skipped$" "$T/out" && ok || bad "test_cnnrun_train closing line: $(tail -1 "$T/out")"
  for t in test_report test_report_train; do
    want_skip "$t (no chromium)" CNNC_CHROMIUM="$T/nochromium" -- bash "$S/$t.sh" "$BUILD" "$SRC"
    grep -qE "^[1-9][0-9]* passed, 0 failed, 1 skipped$" "$T/out" && ok || bad "$t closing line: $(tail -1 "$T/out")"
  done
else
  echo "not run: test_cnnrun_train / test_report / test_report_train with data or chromium hidden (CNNC_RUN_LONG=1)"
fi

# ---- lib.sh's finish ------------------------------------------------------------------------
fin() { bash -c ". '$S/lib.sh'; $1; finish" >/dev/null 2>&1; echo $?; }
[ "$(fin 'ok; skip_part x')" = 77 ] && ok || bad "finish after a skipped part must exit 77"
[ "$(fin 'ok; skip_part x; bad y')" = 1 ] && ok || bad "finish after a failure and a skipped part must exit 1"
[ "$(fin 'ok')" = 0 ] && ok || bad "finish after passes only must exit 0"

# ---- a present dataset is found (the skip is not always taken) ----------------------------
if have_fmnist train && have_fmnist t10k; then
  got=$(CNNC_FMNIST_DIR="$DATA" bash -c ". '$S/lib.sh'; need_fmnist train; need_fmnist t10k; echo present" 2>&1)
  [ "$got" = present ] && ok || bad "a present dataset ($DATA) is reported missing: $got"
else
  skip_part "no Fashion-MNIST here: the present-dataset case was not checked"
fi
finish
