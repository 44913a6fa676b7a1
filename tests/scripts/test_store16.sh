#!/usr/bin/env bash
# test_store16.sh BUILD SRC — 16-bit storage of the training stash (passes/store16.c,
# docs/precision.md "16-bit storage"): with --precision 16.32 / 16.16 every forward value the
# backward (or a later shard) reads is kept in bf16/fp16 buffers.  The values are on the
# 16-bit grid already, so training must be BITWISE the f32-storage build (--tune store16=0):
# checkpoints after 4 updates are compared with cmp for a batch-norm residual model and a
# conv/maxpool/dense model, bf16 and fp16, 16.32 and 16.16, 1 and 2 threads, --recompute
# pipeline on 2 shards, 2 replicas x 2 accumulated micro-batches.  Memory: the report's stash
# is exactly half the f32-storage stash apart from the f32 logits and the weights' 16-bit copies
# (re-rounded in the backward, not stashed), lower than 32.32's, and the
# planned train tensors (cnnrun info) drop; --memory-limit errors show the smaller need and a
# limit between the two fails 32.32 and fits 16.32.  Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat > "$T/res.yml" <<'YML'
name: s16_res
input: {shape: [3, 12, 12], classes: 10}
blocks:
  downsample:
    params: {filters: 16, stride: 2}
    layers:
      - {name: "0", op: conv, filters: =filters, kernel: 1, stride: =stride, bias: false}
      - {name: "1", op: norm}
  basic:
    params: {planes: 8, stride: 1, down: false}
    layers:
      - {name: conv1, op: conv, filters: =planes, kernel: 3, stride: =stride, padding: 1, bias: false}
      - {name: bn1, op: norm}
      - {name: relu1, op: act}
      - {name: conv2, op: conv, filters: =planes, kernel: 3, padding: 1, bias: false}
      - {name: bn2, op: norm}
      - {name: downsample, block: downsample, inputs: [$in], if: =down, args: {filters: =planes, stride: =stride}}
      - {name: add, op: add, inputs: [bn2, downsample]}
      - {name: relu, op: act}
layers:
  - {name: conv1, op: conv, filters: 8, kernel: 3, padding: 1, bias: false}
  - {name: bn1, op: norm}
  - {name: relu, op: act}
  - {name: layer1, block: basic, args: {planes: 8}}
  - {name: layer2, block: basic, args: {planes: 16, stride: 2, down: true}}
  - {name: avgpool, op: global_avgpool}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 10}
YML
cat > "$T/cnn.yml" <<'YML'
name: s16_cnn
input: {shape: [1, 14, 14], dtype: u8, mean: [0.0], std: [1.0], classes: 10}
layers:
  - {name: c1, op: conv, filters: 6, kernel: 3, padding: 1}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2}
  - {name: c2, op: conv, filters: 10, kernel: 3, padding: 1}
  - {name: r2, op: relu}
  - {name: f, op: flatten}
  - {name: d1, op: dense, units: 24}
  - {name: r3, op: relu}
  - {name: d2, op: dense, units: 10}
YML

# build NAME MODEL ARGS...: $T/NAME.so (16-bit storage) and $T/NAME.f32s.so (--tune store16=0;
# also train_fusion=0: a fused batchnorm + relu stores no y, which the 16-bit build's
# narrowed stash keeps, so the stash comparison below needs both to stash the same values;
# the fusions are bitwise, docs/training.md)
build() {
  local name=$1 model=$2
  shift 2
  set -- "$T/$model.yml" --mode training --optimizer momentum --seed 3 "$@"
  cnnc_as "$name" "$@" -o "$T/$name.so" --report "$T/$name" -v &&
    cnnc_as "$name.f32s" "$@" --tune store16=0,train_fusion=0 -o "$T/$name.f32s.so" --report "$T/$name.f32s" && ok
}
# train SO DIR THREADS SAMPLES: synthetic data at lr 0.05, checkpoint in DIR
train() { train_synth "$1" "$2" --lr 0.05 --limit "$4" --logs-per-epoch 1 --threads "$3"; }
# same NAME STEPS SAMPLES: the 16-bit-storage and f32-storage checkpoints are byte-identical (1 and 2 threads)
same() {
  local name=$1 steps=$2 lim=$3 ck
  ck=$(printf 'ckpt-step-%08d.safetensors' "$steps")
  train "$T/$name.so" "$T/c_$name" 2 "$lim"
  train "$T/$name.so" "$T/c1_$name" 1 "$lim"
  train "$T/$name.f32s.so" "$T/cf_$name" 2 "$lim"
  same_bytes "$T/c_$name/$ck" "$T/cf_$name/$ck" "$name: 16-bit storage and f32 storage checkpoints differ (or are missing)"
  same_bytes "$T/c_$name/$ck" "$T/c1_$name/$ck" "$name: 1 and 2 threads differ"
  grep -q "cnnc: 16-bit storage: [1-9][0-9]* values" "$T/$name.log" && ok || bad "$name: cnnc -v lacks the storage line"
  grep -q "widen16\|narrow16" <("$CNNRUN" "$T/$name.so" info 2>&1; "$PY" -c "import json;print(json.dumps(json.load(open('$T/$name.json'))['kernels']))") &&
    ok || bad "$name: no narrow16/widen16 kernels"
}

build res16 res --batch-size 8 --precision 16.32 && same res16 4 32
build res16fp res --batch-size 8 --precision 16.32 --half-type fp16 && same res16fp 4 32
build res1616 res --batch-size 8 --precision 16.16 && same res1616 4 32
build resrc res --batch-size 8 --precision 16.32 --shards 2 --recompute pipeline --gradient-accumulation 2 \
  --pipeline-schedule interleaved && same resrc 2 32
build cnn16 cnn --batch-size 8 --precision 16.32 && same cnn16 4 32
build cnnrep cnn --batch-size 4 --precision 16.16 --replicas 2 --gradient-accumulation 2 && same cnnrep 2 32
build cnnsh cnn --batch-size 8 --precision 16.32 --shards 2 && same cnnsh 4 32
# the comparison can fail: a different lr changes the checkpoint
train_synth "$T/cnn16.so" "$T/clr" --lr 0.04 --limit 32 --logs-per-epoch 1
differ "$T/clr/ckpt-step-00000004.safetensors" "$T/c_cnn16/ckpt-step-00000004.safetensors" "lr 0.04 and 0.05 gave identical checkpoints"

# memory: the report's stash and totals, cnnrun info's train tensors
for m in res cnn; do cnnc_as "${m}32" "$T/$m.yml" --mode training --optimizer momentum --batch-size 8 -o "$T/${m}32.so" --report "$T/${m}32"; done
for pair in "res16 res32 80" "res1616 res32 80" "cnn16 cnn32 40"; do
  set -- $pair
  rr=$(sed -n 's/.*; [0-9]* weight copies (\([0-9]*\) bytes) re-rounded.*/\1/p' "$T/$1.log")
  msg=$("$PY" - "$T/$1.json" "$T/$1.f32s.json" "$T/$2.json" "${rr:-0}" <<'PY'
import json, sys
a, f, b = (json.load(open(p)) for p in sys.argv[1:4])
rr = int(sys.argv[4])  # the weights' 16-bit copies: re-rounded in the backward, not stashed
m16, mf, m32 = (r['shards'][0]['memory'] for r in (a, f, b))
logits = 8 * 10 * 4  # the f32 logits stay f32 (read by softmax_xent_grad)
err = []
if 2 * m16['stash'] - (mf['stash'] - rr) != logits or rr <= 0:
    err.append('stash %d is not (f32-storage stash %d - weight copies %d - logits %d) / 2 + logits' % (m16['stash'], mf['stash'], rr, logits))
if not m16['stash'] < m32['stash']:
    err.append('stash %d not below 32.32 %d' % (m16['stash'], m32['stash']))
if not m16['total'] < mf['total']:
    err.append('total %d not below f32 storage %d' % (m16['total'], mf['total']))
print('; '.join(err) if err else 'ok %d %d %d %d %d' % (m16['stash'], mf['stash'], m32['stash'], m16['total'], m32['total']))
PY
)
  case "$msg" in ok*) ok ;; *) bad "$1 vs $2: $msg" ;; esac
done
tt() { "$CNNRUN" "$1" info | sed -n 's/.*micro_batch.*train tensors \([0-9]*\) bytes.*/\1/p'; }
a=$(tt "$T/res16.so"); b=$(tt "$T/res16.f32s.so")
[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ] && ok || bad "cnnrun info train tensors: 16-bit $a vs f32 storage $b"

# --memory-limit (the planner's estimate from the graph, memory_limit.c): the error of a tiny
# limit shows the smaller need of 16.32; a limit between the two fails 32.32 and fits 16.32
need() { # PRECISION -> bytes the shard needs ("shard 0 needs X MiB")
  "$CNNC" "$T/res.yml" --mode training --optimizer momentum --batch-size 8 --precision "$1" --memory-limit 1000 \
    -o "$T/x.so" 2>&1 | sed -n 's/.*shard 0 needs \([0-9.]*\) \(KiB\|MiB\).*/\1 \2/p' |
    awk '{ printf "%d\n", $1 * ($2 == "MiB" ? 1048576 : 1024) }'
}
n32=$(need 32.32); n16=$(need 16.32)
if [ -n "$n32" ] && [ -n "$n16" ] && [ "$n16" -lt "$n32" ]; then
  ok
  lim=$(( (n16 + n32) / 2 ))
  "$CNNC" "$T/res.yml" --mode training --optimizer momentum --batch-size 8 --memory-limit "$lim" -o "$T/x.so" >"$T/out" 2>&1 &&
    bad "32.32 fits --memory-limit $lim" || ok
  "$CNNC" "$T/res.yml" --mode training --optimizer momentum --batch-size 8 --precision 16.32 --memory-limit "$lim" \
    -o "$T/x.so" >"$T/out" 2>&1 && ok || bad "16.32 does not fit --memory-limit $lim: $(head -c 300 "$T/out")"
else
  bad "--memory-limit: 16.32 needs '$n16', 32.32 '$n32'"
fi
finish
