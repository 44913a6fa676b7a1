#!/usr/bin/env bash
# test_mpi_infer.sh BUILD SRC — inference across processes (docs/mpi.md "Inference"):
# `mpirun -np N cnnrun X.so infer` splits the micro-batches over the ranks and rank 0 writes
# the outputs byte-identical to one process (2 and 3 ranks, a partial last micro-batch, two
# outputs), prints the same accuracy once, and a --trace per rank; `mpirun cnnrun X.so
# benchmark` reports every rank and the sum (text and JSON); a training model, --replicas and
# --profile under mpirun are refused.  Skips (77) without mpirun or libcnnrt_mpi.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
need_mpi
mpi() { local n=$1; shift; timeout 120 mpirun --oversubscribe -np "$n" "$@"; }

# 1000 random 28x28 u8 images as idx, labels 0..9
/usr/bin/env python3 - "$T" <<'EOF' || bad "writing the samples"
import random, struct, sys
random.seed(3)
n = 1000
with open(sys.argv[1] + "/x.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(random.randrange(256) for _ in range(n * 784)))
with open(sys.argv[1] + "/y.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(random.randrange(10) for _ in range(n)))
EOF
"$CNNC" "$SRC/models/fmnist_cnn.yml" --batch-size 7 --seed 3 -o "$T/f7.so" >"$T/c.log" 2>&1 || bad "cnnc fmnist_cnn: $(tail -3 "$T/c.log")"

# one process vs N ranks: the same output bytes and accuracy line
infer_args=(infer --input "$T/x.idx" --labels "$T/y.idx" --threads 1 --batches 4)
"$CNNRUN" "$T/f7.so" "${infer_args[@]}" --output "$T/one.bin" >"$T/one.log" 2>"$T/one.err" || bad "one process: $(tail -3 "$T/one.err")"
for n in 2 3; do
  rm -f "$T/tr.json"*
  if mpi "$n" "$CNNRUN" "$T/f7.so" "${infer_args[@]}" --output "$T/n$n.bin" --trace "$T/tr.json" >"$T/n$n.log" 2>"$T/n$n.err"; then
    same_bytes "$T/one.bin" "$T/n$n.bin" "$n ranks: the outputs differ from one process's"
    # stdout is rank 0's only: the accuracy once, as one process prints it
    [ "$(grep -c '^accuracy' "$T/n$n.log")" = 1 ] && [ "$(grep '^accuracy' "$T/n$n.log")" = "$(grep '^accuracy' "$T/one.log")" ] && ok ||
      bad "$n ranks: accuracy lines $(grep '^accuracy' "$T/n$n.log" | tr '\n' '|') vs $(grep '^accuracy' "$T/one.log")"
    [ -s "$T/tr.json" ] && [ -s "$T/tr.json.rank$((n - 1))" ] && ok || bad "$n ranks: no trace per rank: $(ls "$T" | grep tr.json | tr '\n' ' ')"
  else
    bad "$n ranks: mpirun failed: $(tail -3 "$T/n$n.err")"
  fi
done
# the comparison can fail: other weights give other bytes
"$CNNC" "$SRC/models/fmnist_cnn.yml" --batch-size 7 --seed 4 -o "$T/g7.so" >"$T/c.log" 2>&1 &&
  mpi 2 "$CNNRUN" "$T/g7.so" "${infer_args[@]}" --output "$T/g.bin" >/dev/null 2>&1 && differ "$T/one.bin" "$T/g.bin" "other weights, same outputs"

# benchmark: a row per rank and the total
if mpi 2 "$CNNRUN" "$T/f7.so" benchmark --threads 1 --runs 3 >"$T/b.log" 2>"$T/b.err"; then
  grep -q '^model fmnist_cnn: batch 7, 1 shard, 2 ranks' "$T/b.log" && grep -q '^  rank 1: host .*, threads 1, 3 runs in' "$T/b.log" &&
    grep -q '^6 runs of 8 batches over 2 ranks' "$T/b.log" && grep -qE '^throughput  [0-9.]+ img/s' "$T/b.log" && ok ||
    bad "benchmark text: $(cat "$T/b.log")"
else
  bad "benchmark: $(tail -3 "$T/b.err")"
fi
if mpi 2 "$CNNRUN" "$T/f7.so" benchmark --threads 1 --runs 2 --json >"$T/bj.log" 2>"$T/bj.err"; then
  /usr/bin/env python3 - "$T/bj.log" <<'EOF' && ok || bad "benchmark --json: $(cat "$T/bj.log")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["ranks"] == 2 and len(d["rank"]) == 2 and all(r["runs"] == 2 for r in d["rank"]), d
total = sum(r["runs"] for r in d["rank"]) * d["batches_per_run"] * d["batch_size"] / max(r["seconds"] for r in d["rank"])
assert abs(d["images_per_second"] - total) <= 1e-3 * total, (d["images_per_second"], total)
EOF
else
  bad "benchmark --json: $(tail -3 "$T/bj.err")"
fi

# refused under mpirun, with a message
expect_refused() { # NAME PATTERN CMD...
  local name=$1 pat=$2
  shift 2
  mpi 2 "$@" >"$T/r.log" 2>&1
  local rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "$pat" "$T/r.log" && ok || bad "$name: rc $rc: $(head -5 "$T/r.log")"
}
"$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --batch-size 8 -o "$T/t.so" >"$T/c.log" 2>&1 || bad "cnnc training: $(tail -3 "$T/c.log")"
expect_refused "benchmark of a training model" "is a training model; train it across ranks" "$CNNRUN" "$T/t.so" benchmark --threads 1
expect_refused "benchmark --replicas" "every rank is one model instance" "$CNNRUN" "$T/f7.so" benchmark --replicas 2 --threads 1
expect_refused "infer --replicas" "every rank is one model instance" "$CNNRUN" "$T/f7.so" infer --input "$T/x.idx" --output "$T/r.bin" --replicas 2
finish
