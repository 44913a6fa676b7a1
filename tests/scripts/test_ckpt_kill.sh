#!/usr/bin/env bash
# test_ckpt_kill.sh BUILD SRC — checkpoints survive kill -9 (issue 26): a `cnnrun train` that
# writes a checkpoint at every step (3.2 MB each) is killed with SIGKILL at a random moment,
# CNNC_KILL_RUNS times (default 5; 40 in the `long` test test_ckpt_kill_40), each run restoring
# the newest checkpoint of the last.  After every kill, every complete checkpoint
# (ckpt-step-*.safetensors) must load (`cnnrun validate`: no torn file under the final name);
# temporary files (*.tmp.PID) of the killed run may be there.  Then one more run trains to its
# end: it must remove them (the next run clears a dead process's temporaries) and leave only
# valid checkpoints.  How many kills hit a checkpoint write is printed, not required (random).
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
RUNS=${CNNC_KILL_RUNS:-5}
D="$T/ck"
if [ "$RUNS" -gt 5 ] && [ "${CNNC_RUN_LONG:-0}" != 1 ]; then skip_all "long check ($RUNS kills); runs with CNNC_RUN_LONG=1"; fi

cat >"$T/k.yml" <<'EOF'
name: killme
input: {shape: [1, 28, 28], classes: 10}
layers:
  - {name: f, op: flatten}
  - {name: fc1, op: dense, units: 512}
  - {name: r, op: relu}
  - {name: fc2, op: dense, units: 10}
EOF
cnnc_as compile "$T/k.yml" --mode training --optimizer momentum --batch-size 16 -o "$T/k.so" || { finish; exit 1; }

newest() { ls "$D"/ckpt-step-*.safetensors 2>/dev/null | sort | tail -n 1; }
# train_args ARGS...: into A, the command line of a run: 1024 synthetic samples, 64 steps per
# epoch, a checkpoint at every step, from the newest checkpoint
train_args() {
  A=("$CNNRUN" "$T/k.so" train --dataset synthetic --logs-per-epoch 64 --checkpoint-dir "$D" "$@")
  [ -z "$(newest)" ] || A+=(--restore "$(newest)")
}
# all_valid WHAT: every checkpoint in $D loads
all_valid() {
  if "$CNNRUN" "$T/k.so" validate --dataset synthetic --limit 16 --checkpoint "$D" >"$T/v.out" 2>&1; then ok
  else bad "$1: a checkpoint does not load: $(head -c 500 "$T/v.out")"; fi
}

hits=0
for i in $(seq 1 "$RUNS"); do
  train_args --epochs 100000
  "${A[@]}" >"$T/run$i.log" 2>&1 &
  pid=$!
  sleep "$(python3 -c "import random; print(round(random.uniform(0.15, 1.2), 3))")"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ls "$D"/*.tmp.* >/dev/null 2>&1 && hits=$((hits + 1))
  [ -n "$(newest)" ] || { bad "run $i: no checkpoint before the kill: $(tail -c 300 "$T/run$i.log")"; continue; }
  all_valid "after kill $i"
  # keep the newest checkpoint (the next run restores it) and the temporaries
  ls "$D"/ckpt-step-*.safetensors | sort | head -n -1 | xargs -r rm -f
done
echo "$hits of $RUNS kills left a temporary checkpoint behind"

# one more run, to its end: no temporary file left, every checkpoint valid
step=$(basename "$(newest)" .safetensors | sed 's/^ckpt-step-0*//')
train_args --epochs $(( ${step:-0} / 64 + 1 ))
if "${A[@]}" >"$T/last.log" 2>&1; then ok; else bad "the last run failed: $(tail -c 500 "$T/last.log")"; fi
left=$(ls "$D" | grep -c '\.tmp\.')
[ "$left" = 0 ] && ok || bad "$left temporary files left: $(ls "$D" | grep '\.tmp\.' | head -3)"
[ "$hits" = 0 ] || grep -q "removed [0-9]* temporary checkpoint" "$T/last.log" "$T"/run*.log && ok ||
  bad "no run said it removed the temporary checkpoints of killed runs"
all_valid "after the last run"
finish
