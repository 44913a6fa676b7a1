#!/usr/bin/env bash
# test_cnnrun.sh BUILD SRC — cnnrun info / benchmark / infer on the fake model .so files of
# tests/tools (raw, idx and idx.gz inputs, outputs checked against values computed here),
# and exit statuses: 0 success, 1 errors (bad model, bad file), 2 usage.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
FAKE="$BUILD/tests/libfake_model.so"

# check NAME PYTHON-EXPR: a Python assertion over the files in $T.
check() {
  local name=$1
  if python3 -c "$2" "$T" 2>"$T/pyerr"; then ok; else bad "$name: $(tail -3 "$T/pyerr")"; fi
}

[ -x "$CNNRUN" ] || { echo "FAIL: no $CNNRUN"; echo "0 passed, 1 failed"; exit 1; }

# ---- usage -----------------------------------------------------------------------------------
expect 0 "usage: cnnrun" -- --help
expect 0 "libcnnrt .*model ABI" -- --version
expect 2 "no model given" --
expect 2 "no command given" -- "$FAKE"
expect 2 "unknown command 'frobnicate'" -- "$FAKE" frobnicate
expect 2 "unknown option '--bogus'" -- "$FAKE" info --bogus
expect 2 "--batches: must be an integer in 1..1048576 \\(got '0'\\)" -- "$FAKE" benchmark --batches 0
expect 2 "--runs: must be an integer in 1..1048576 \\(got 'abc'\\)" -- "$FAKE" benchmark --runs abc
expect 2 "--threads needs a value" -- "$FAKE" benchmark --threads
expect 2 "--json takes no value" -- "$FAKE" info --json=1
expect 2 "--input FILE is required" -- "$FAKE" infer --output "$T/y"
expect 2 "give --output FILE, --top K or --labels FILE" -- "$FAKE" infer --input "$T/x"
expect 2 "--format: 'png' is not" -- "$FAKE" infer --input "$T/x" --top 1 --format png
expect 0 "--batches N" -- "$FAKE" benchmark --help
expect 0 "--labels FILE" -- "$FAKE" infer --help
expect 0 "--json" -- /nonexistent.so info --help

# ---- bad models ------------------------------------------------------------------------------
expect 1 "nonexistent.so: cannot open: No such file" -- "$T/nonexistent.so" info
expect 1 "model ABI version 99" -- "$BUILD/tests/libfake_model_abi99.so" info
expect 1 "no model descriptor" -- "$BUILD/tests/libfake_model_nosym.so" benchmark
head -c 3000 "$FAKE" >"$T/trunc.so"
expect 1 "truncated" -- "$T/trunc.so" info
printf 'garbage' >"$T/garbage.so"
expect 1 "no ELF header" -- "$T/garbage.so" info --json

# ---- info ------------------------------------------------------------------------------------
expect 0 "model +fake_model" -- "$FAKE" info
expect 0 "shard 1 +inc \.\. inc: 1 ops" -- "$FAKE" info
"$CNNRUN" "$FAKE" info --json >"$T/info.json" 2>&1
check "info --json" "
import json, sys
d = json.load(open(sys.argv[1] + '/info.json'))
assert d['model'] == 'fake_model' and d['batch_size'] == 2 and len(d['shards']) == 2, d
assert d['shards'][0]['ops'][1]['kernel'] == 'fake_rotate_f32'
assert d['options']['pipeline_splits'] == ['inc']"

# ---- benchmark -------------------------------------------------------------------------------
expect 0 "throughput +[0-9.]+ img/s" -- "$FAKE" benchmark --batches 4 --runs 2
expect 0 "latency per batch +mean [0-9.]+ ms +p50 [0-9.]+ ms +p90" -- "$FAKE" benchmark --runs 3 --warmup 0
expect 1 "--threads has 3 values, the model has 2 shards" -- "$FAKE" benchmark --threads 1,2,3
"$CNNRUN" "$FAKE" benchmark --json --batches 6 --runs 3 --threads 2,1 --pin >"$T/bench.json" 2>&1
check "benchmark --json" "
import json, sys
d = json.load(open(sys.argv[1] + '/bench.json'))
assert d['runs'] == 3 and d['batches_per_run'] == 6 and d['threads'] == [2, 1] and d['pinned'], d
assert d['images_per_second'] > 0 and 0 < d['latency_ms']['p50'] <= d['latency_ms']['p90'], d"
expect 1 "returned 3" -- "$BUILD/tests/libfake_model_failrun.so" benchmark --runs 1

# ---- infer -----------------------------------------------------------------------------------
# 5 samples of [1,4,4]: idx u8, idx.gz, and the same as raw f32 (x/255, what cnnrun feeds).
python3 - "$T" <<'PY'
import gzip, struct, sys, array
t = sys.argv[1]
data = bytes((i * 37 + 11) % 256 for i in range(5 * 16))
idx = bytes([0, 0, 8, 3]) + struct.pack('>III', 5, 4, 4) + data
open(t + '/x.idx', 'wb').write(idx)
gzip.open(t + '/x.idx.gz', 'wb').write(idx)
open(t + '/x.raw', 'wb').write(array.array('f', [v / 255 for v in data]).tobytes())
open(t + '/bad.idx', 'wb').write(bytes([0, 0, 8, 3]) + struct.pack('>III', 5, 3, 3) + data[:45])
# expected logits: micro-batches of 2 samples (the last padded with zeros),
# logits[b,k] = 2 x[(16b+k+7) % 32] + 1 within a micro-batch
x = array.array('f', [v / 255 for v in data] + [0.0] * 16)
want = []
for mb in range(3):
    for b in range(2):
        for k in range(10):
            want.append(2 * x[mb * 32 + (16 * b + k + 7) % 32] + 1)
want = array.array('f', want[:50])
open(t + '/want.bin', 'wb').write(want.tobytes())
top = [max(range(10), key=lambda k: want[i * 10 + k]) for i in range(5)]
labels = bytes(top[:3] + [(top[3] + 1) % 10, (top[4] + 1) % 10])
open(t + '/labels.idx', 'wb').write(bytes([0, 0, 8, 1]) + struct.pack('>I', 5) + labels)
open(t + '/labels4.idx', 'wb').write(bytes([0, 0, 8, 1]) + struct.pack('>I', 4) + labels[:4])
open(t + '/top.txt', 'w').write(' '.join(map(str, top)))
u8 = bytes((i * 53 + 7) % 256 for i in range(3 * 12))
# the same samples as big-endian f32 idx (type 0x0D), values already scaled
open(t + '/x_f32.idx', 'wb').write(bytes([0, 0, 0x0D, 3]) + struct.pack('>III', 5, 4, 4) +
                                   struct.pack('>80f', *array.array('f', [v / 255 for v in data])))
open(t + '/f32_12.idx', 'wb').write(bytes([0, 0, 0x0D, 2]) + struct.pack('>II', 2, 12) + struct.pack('>24f', *range(24)))
open(t + '/u8.idx', 'wb').write(bytes([0, 0, 8, 4]) + struct.pack('>IIII', 3, 3, 2, 2) + u8)
PY
expect 0 "5 samples, outputs written" -- "$FAKE" infer --input "$T/x.raw" --output "$T/y_raw.bin"
expect 0 "5 samples" -- "$FAKE" infer --input "$T/x.idx" --output "$T/y_idx.bin" --batches 1
expect 0 "5 samples" -- "$FAKE" infer --input "$T/x.idx.gz" --output "$T/y_gz.bin" --threads 2
check "infer outputs" "
import sys
t = sys.argv[1]
want = open(t + '/want.bin', 'rb').read()
for f in ('y_raw.bin', 'y_idx.bin', 'y_gz.bin'):
    got = open(t + '/' + f, 'rb').read()
    assert got == want, (f, len(got), len(want))"
top=$(cat "$T/top.txt")
set -- $top
expect 0 "^sample 0: $1 \(" -- "$FAKE" infer --input "$T/x.idx" --top 1
expect 0 "^sample 4: $5 \([^)]*\) [0-9]+ \([^)]*\) [0-9]+ \(" -- "$FAKE" infer --input "$T/x.idx" --top 3
expect 0 "^accuracy 0\.6000 \(3/5\)" -- "$FAKE" infer --input "$T/x.idx.gz" --top 1 --labels "$T/labels.idx"
expect 1 "4 labels for 5 samples" -- "$FAKE" infer --input "$T/x.idx" --labels "$T/labels4.idx"
head -c 100 "$T/x.raw" >"$T/short.raw"
expect 1 "100 bytes is not a whole number of samples of 64 bytes" -- "$FAKE" infer --input "$T/short.raw" --top 1
expect 1 "idx samples have 9 values, the model input 'input' takes 16" -- "$FAKE" infer --input "$T/bad.idx" --top 1
expect 1 "not an idx file" -- "$FAKE" infer --input "$T/x.raw" --format idx --top 1
expect 1 "missing.idx: No such file" -- "$FAKE" infer --input "$T/missing.idx" --top 1
expect 1 "nodir/y.bin cannot be created: directory .*nodir: No such file" -- "$FAKE" infer --input "$T/x.idx" --output "$T/nodir/y.bin"
expect 1 "the model takes u8 images, the idx file is not u8" -- "$BUILD/tests/libfake_model_u8skip.so" infer --input "$T/f32_12.idx" --top 1
expect 0 "5 samples" -- "$FAKE" infer --input "$T/x_f32.idx" --output "$T/y_f32idx.bin"
check "f32 idx input" "
import sys
t = sys.argv[1]
assert open(t + '/y_f32idx.bin', 'rb').read() == open(t + '/want.bin', 'rb').read()"
# u8 model, two outputs: out [3,12] then aux [3,1] in the output file.
expect 0 "3 samples" -- "$BUILD/tests/libfake_model_u8skip.so" infer --input "$T/u8.idx" --output "$T/y_u8.bin"
check "u8 model outputs" "
import sys, array
t = sys.argv[1]
x = open(t + '/u8.idx', 'rb').read()[20:]
y = array.array('f'); y.frombytes(open(t + '/y_u8.bin', 'rb').read())
assert len(y) == 3 * 12 + 3, len(y)
f = lambda v: array.array('f', [v])[0]
for i in range(36):
    a = f(x[i] / 255)
    assert abs(y[i] - (3 * a + x[i])) < 1e-4, (i, y[i])
for s in range(3):
    assert abs(y[36 + s] - sum(x[s * 12:(s + 1) * 12]) / 255) < 1e-4, (s, y[36 + s])"

finish
