# lib.sh — sourced by the shell test scripts: a temporary directory $T (removed on exit),
# pass/fail counters with ok / bad, `expect` for cnnrun exit statuses and messages, and
# `finish`, which prints the closing "N passed, M failed" line and sets the exit status;
# `need_fmnist` for the tests that train or validate on Fashion-MNIST; `skip_all` / `skip_part`
# for optional data or tools (exit 77 = SKIP_RETURN_CODE of the script tests, tests/CMakeLists.txt:
# ctest reports "Skipped", not "Passed", when something was not checked); `quick`: true under
# CNNC_TEST_QUICK=1 (.ci/run's sanitizer stage), where a test may run fewer samples or cases.
# `code_of` / `same_code` compare the code of two --emit llvm / asm outputs (not their options).
SKIP=77
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
skipped=0
ok() { pass=$((pass + 1)); }
quick() { [ -n "${CNNC_TEST_QUICK:-}" ] && [ "$CNNC_TEST_QUICK" != 0 ]; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

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

# chromium_path: the headless browser for the HTML checks ($CNNC_CHROMIUM, else chromium or
# chromium-browser on PATH); prints nothing when there is none.
chromium_path() {
  if [ -n "${CNNC_CHROMIUM+x}" ]; then
    [ -x "$CNNC_CHROMIUM" ] && echo "$CNNC_CHROMIUM"
    return 0
  fi
  command -v chromium || command -v chromium-browser || true
}
