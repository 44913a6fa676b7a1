# lib.sh — sourced by the shell test scripts: a temporary directory $T (removed on exit),
# pass/fail counters with ok / bad, `expect` for cnnrun exit statuses and messages, and
# `finish`, which prints the closing "N passed, M failed" line and sets the exit status;
# `need_fmnist` for the tests that train or validate on Fashion-MNIST.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
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

finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" = 0 ]
}

# need_fmnist [train|t10k]: DATA = the Fashion-MNIST directory ($CNNC_FMNIST_DIR, default
# Debian's dataset-fashion-mnist); prints "skip: ..." and exits 0 when that split's images
# (plain or .gz) are not there.
need_fmnist() {
  DATA=${CNNC_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
  local split=${1:-train}
  if [ ! -e "$DATA/$split-images-idx3-ubyte" ] && [ ! -e "$DATA/$split-images-idx3-ubyte.gz" ]; then
    echo "skip: no Fashion-MNIST in $DATA"
    exit 0
  fi
}
