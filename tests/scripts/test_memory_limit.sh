#!/usr/bin/env bash
# test_memory_limit.sh BUILD SRC [--update] — `--memory-limit` and `--available-memory-proportion`
# (docs/cli.md).  Golden cases: the full stderr of a compile that does not fit (shard, peak step,
# largest live tensors, amount over, what would fit) or of a bad value, against
# tests/scripts/memory_limit/NAME.err ("exit: N" last; --update rewrites them); no .so is
# written.  Checks: the suggested --batch-size does fit; the limit is exact (the report's
# `limited` bytes fit, one byte less does not); size suffixes; the model's compile: section;
# training (a state-dominated failure names the training state and --recompute).
set -u
BUILD=$(cd "${1:?usage: test_memory_limit.sh BUILD SRC [--update]}" && pwd)
SRC=$(cd "${2:?usage: test_memory_limit.sh BUILD SRC [--update]}" && pwd)
UPDATE=0
[ "${3:-}" = "--update" ] && UPDATE=1
CNNC="$BUILD/cnnc"
. "$SRC/tests/scripts/lib.sh"
cd "$SRC" || exit 2
M=models/cifar_resnet8.yml
GOLD=tests/scripts/memory_limit

# golden NAME ARGS...: cnnc ARGS -o $T/NAME.so; stderr + "exit: N" must equal $GOLD/NAME.err and
# no .so may be written.
golden() {
  local name=$1
  shift
  rm -f "$T/$name.so"
  "$CNNC" "$@" -o "$T/$name.so" >"$T/$name.out" 2>&1
  echo "exit: $?" >>"$T/$name.out"
  if [ "$UPDATE" = 1 ]; then
    cp "$T/$name.out" "$GOLD/$name.err" && echo "updated $GOLD/$name.err" && ok
  elif diff -u "$GOLD/$name.err" "$T/$name.out" >"$T/diff"; then ok
  else bad "$name: output differs from $GOLD/$name.err: $(head -c 1500 "$T/diff")"; fi
  [ ! -e "$T/$name.so" ] && ok || bad "$name: a .so was written although the compile failed"
}

golden over_100k "$M" --memory-limit 100K
golden batch8_over_1m "$M" --batch-size 8 --memory-limit 1M
golden two_shards_over "$M" --batch-size 8 --shards 2 --memory-limit 1M
golden proportion_count "$M" --shards 2 --available-memory-proportion 0.6,0.3,0.2
golden bad_suffix "$M" --memory-limit 12X
golden bad_proportion "$M" --available-memory-proportion 0.6,1.5

# The suggestion is right: the batch size the message proposes fits under the same limit.
b=$(grep -oE -- "--batch-size [0-9]+" "$GOLD/batch8_over_1m.err" | head -1 | cut -d' ' -f2)
if [ -n "$b" ] && "$CNNC" "$M" --batch-size "$b" --memory-limit 1M -o "$T/fit.so" --report "$T/fit" >"$T/fit.out" 2>&1 &&
  [ -s "$T/fit.so" ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not all(s['memory']['fits'] for s in r['shards']))" "$T/fit.json"
then ok; else bad "the suggested --batch-size '$b' does not fit 1M: $(head -c 400 "$T/fit.out")"; fi

# Exact: the report's counted bytes (arena + io) are the limit's figure.
"$CNNC" "$M" --batch-size 4 -o "$T/ref.so" --report "$T/ref" >/dev/null 2>&1
need=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['shards'][0]['memory']['limited'])" "$T/ref.json" 2>/dev/null)
if [ -n "$need" ] && "$CNNC" "$M" --batch-size 4 --memory-limit "$need" -o "$T/eq.so" >/dev/null 2>&1 && [ -s "$T/eq.so" ]; then ok
else bad "--memory-limit equal to the report's limited bytes ($need) must fit"; fi
rm -f "$T/lt.so"
"$CNNC" "$M" --batch-size 4 --memory-limit "$((need - 1))" -o "$T/lt.so" >"$T/lt.out" 2>&1
[ $? = 1 ] && [ ! -e "$T/lt.so" ] && grep -q "1 B over --memory-limit" "$T/lt.out" && ok ||
  bad "one byte below the need must fail by 1 B: $(head -c 400 "$T/lt.out")"

# Sizes: binary suffixes, fractions with a suffix; the report records the bytes.
"$CNNC" "$M" --memory-limit 1.5G -o "$T/g.so" --report "$T/g" >/dev/null 2>&1 &&
  python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['memory_limit'] != 1610612736)" "$T/g.json" && ok ||
  bad "--memory-limit 1.5G must be 1610612736 bytes"
for v in 512K 512KiB 64M 1g 1000 0; do
  "$CNNC" "$M" --memory-limit "$v" --emit ir -o /dev/null >/dev/null 2>&1 && ok || bad "--memory-limit $v rejected"
done
for v in 1.5 -1 K 12X 1MB2 ""; do
  "$CNNC" "$M" --memory-limit "$v" --emit ir -o /dev/null >/dev/null 2>&1
  [ $? = 2 ] && ok || bad "--memory-limit '$v' must be a usage error"
done

# The model's compile: section sets it too (error located at the peak layer of the model file).
sed 's/^input: /compile: {memory_limit: 100K}\ninput: /' "$M" >"$T/limited.yml"
"$CNNC" "$T/limited.yml" -o "$T/y.so" >"$T/y.out" 2>&1
[ $? = 1 ] && grep -q "limited.yml:[0-9]*:[0-9]*: error: layer '.*': shard 0 needs" "$T/y.out" && [ ! -e "$T/y.so" ] && ok ||
  bad "compile: {memory_limit: 100K}: $(head -c 400 "$T/y.out")"

# Training: the state (weights + momentum) alone exceeds 8M; 1G fits.
F=models/fmnist_cnn.yml
"$CNNC" "$F" --mode training --optimizer momentum --batch-size 32 --memory-limit 8M -o "$T/t.so" >"$T/t.out" 2>&1
rc=$?
if [ $rc = 1 ] && [ ! -e "$T/t.so" ] && grep -q "error: layer '.*': shard 0 needs .* + training state .* over --memory-limit 8.0 MiB" "$T/t.out" &&
  grep -q "the training state alone is" "$T/t.out" && grep -q -- "--recompute" "$T/t.out"; then ok
else bad "training over 8M (exit $rc): $(head -c 600 "$T/t.out")"; fi
"$CNNC" "$F" --mode training --optimizer momentum --batch-size 32 --memory-limit 1G -o "$T/t1.so" >"$T/t1.out" 2>&1 &&
  [ -s "$T/t1.so" ] && ok || bad "training under 1G must compile: $(head -c 400 "$T/t1.out")"

finish
