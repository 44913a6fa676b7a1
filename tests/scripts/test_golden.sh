#!/usr/bin/env bash
# test_golden.sh BUILD_DIR SRC_DIR [--update] — the frontend's golden tests.
#
#   tests/golden/ok/NAME.yml   -> NAME.ir : stdout of `cnnc NAME.yml --emit ir` (must exit 0)
#   tests/golden/err/NAME.yml  -> NAME.err: stderr of `cnnc NAME.yml --emit ir` and a last
#                                 line "exit: N" (must exit non-zero)
#
# A line "# cnnc-args: ARGS" in a .yml adds ARGS to its command line.  cnnc runs from SRC_DIR
# with the relative path, so messages read "tests/golden/err/NAME.yml:3:5: error: ...".
# --update rewrites the expected files from the current output.  The last line of output is
# "N passed, M failed"; the exit status is non-zero when anything failed.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SRC_DIR [--update]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
SRC=$(cd "$2" && pwd) || exit 2
UPDATE=0
[ "${3:-}" = "--update" ] && UPDATE=1
CNNC="$BUILD/cnnc"
if [ ! -x "$CNNC" ]; then
  echo "test_golden: $CNNC not built" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
cd "$SRC" || exit 2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

args_of() { sed -n 's/^# cnnc-args: //p' "$1" | head -n 1; }

# check NAME EXPECTED_FILE ACTUAL_FILE
check() {
  if [ "$UPDATE" = 1 ]; then
    cp "$3" "$2"
    echo "updated $2"
    passed=$((passed + 1))
  elif [ -f "$2" ] && diff -u "$2" "$3" > "$TMP/diff"; then
    passed=$((passed + 1))
  else
    echo "FAIL $1"
    if [ -f "$2" ]; then sed 's/^/    /' "$TMP/diff"; else echo "    missing $2 (run with --update)"; fi
    failed=$((failed + 1))
  fi
}

for y in tests/golden/ok/*.yml; do
  [ -e "$y" ] || continue
  name=${y%.yml}
  # shellcheck disable=SC2046
  timeout 60 "$CNNC" "$y" --emit ir $(args_of "$y") > "$TMP/out" 2> "$TMP/err"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $y: exit $rc"
    sed 's/^/    /' "$TMP/err"
    failed=$((failed + 1))
    continue
  fi
  check "$y" "$name.ir" "$TMP/out"
done

for y in tests/golden/err/*.yml; do
  [ -e "$y" ] || continue
  name=${y%.yml}
  # shellcheck disable=SC2046
  timeout 60 "$CNNC" "$y" --emit ir $(args_of "$y") > /dev/null 2> "$TMP/err"
  rc=$?
  echo "exit: $rc" >> "$TMP/err"
  if [ $rc -eq 0 ] || [ $rc -gt 2 ]; then
    echo "FAIL $y: exit $rc (want 1 or 2: a located error, no crash)"
    sed 's/^/    /' "$TMP/err"
    failed=$((failed + 1))
    continue
  fi
  check "$y" "$name.err" "$TMP/err"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
