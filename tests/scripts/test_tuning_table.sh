#!/usr/bin/env bash
# test_tuning_table.sh BUILD SRC — the tuning table (ir/tuning.def): the code-generation knobs
# set with cnnc --tune name=value,..., CNNC_TUNE in cnnc's environment, or a tune: map in a
# model's compile: section.  Checks that
#  (a) cnnc --help-tune lists every row of ir/tuning.def: its name, range, default and help;
#  (b) every knob is exercised by a test: its name occurs as NAME=<digit> (a --tune or ct_tune
#      item) or ct_tuning.NAME in a file under tests/ other than this script.  The knobs that do
#      not are printed and the check fails: such a knob gets a test or leaves the table;
#  (c) a bad knob is an error naming it, with a non-zero exit: --tune nosuch=1, winograd=2,
#      winograd (no value), CNNC_TUNE=nosuch=1, and compile: {tune: {winograd: 5}} in a model
#      (that one also naming the file and line);
#  (d) the .so records every knob: models/fmnist_cnn.yml with --tune winograd=0 gives
#      "winograd": 0 and every other knob at its default in the options JSON of cnnrun info;
#  (e) CNNC_TUNE=winograd=0 records the same value; --tune wins over CNNC_TUNE, and over the
#      model's tune: map.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
DEF="$SRC/ir/tuning.def"
unset CNNC_TUNE # the checks below set it where they mean to

knobs=$(sed -n 's/^TUNE(\([a-z0-9_]*\),.*/\1/p' "$DEF")
[ "$(echo "$knobs" | wc -w)" -ge 10 ] && ok || bad "ir/tuning.def: only '$knobs' read as knobs"

# ---- (a) --help-tune lists every row ------------------------------------------------------
if "$CNNC" --help-tune >"$T/help" 2>&1; then ok; else bad "cnnc --help-tune: exit $?: $(head -c 400 "$T/help")"; fi
if "$PY" - "$DEF" "$T/help" >"$T/py.out" 2>&1 <<'P'; then ok; else bad "--help-tune: $(cat "$T/py.out")"; fi
import re, sys
rows = re.findall(r'^TUNE\((\w+),\s*(BOOL|INT),\s*(-?\d+),\s*(-?\d+),\s*(-?\d+),\s*"((?:[^"\\]|\\.)*)"\)', open(sys.argv[1]).read(), re.M)
help_lines = open(sys.argv[2]).read().splitlines()
listed = [l.split()[0] for l in help_lines if re.match(r"^  \w+ +\S+ +default ", l)]
bad = []
for name, typ, d, lo, hi, text in rows:
    rng = "0|1" if typ == "BOOL" else f"{lo}..{hi}"
    want = re.compile(r"^  %s +%s +default %s +%s$" % (re.escape(name), re.escape(rng), re.escape(d), re.escape(text.replace('\\"', '"'))))
    if not any(want.match(l) for l in help_lines):
        bad.append(f"{name} ({rng}, default {d}) not listed as in ir/tuning.def")
if listed != [r[0] for r in rows]:
    bad.append(f"listed {len(listed)} knobs, ir/tuning.def has {len(rows)} rows (or another order)")
if len(rows) < 10:
    bad.append(f"only {len(rows)} rows parsed from ir/tuning.def")
if bad:
    sys.exit("; ".join(bad))
P

# ---- (b) every knob exercised by a test -----------------------------------------------------
unused=""
for k in $knobs; do
  if ! grep -rlE "(^|[^A-Za-z0-9_])$k=[0-9]|ct_tuning\.$k([^A-Za-z0-9_]|\$)" "$SRC/tests" | grep -qv '/test_tuning_table\.sh$'; then
    unused="$unused $k"
  fi
done
if [ -z "$unused" ]; then ok; else
  bad "knobs no test under tests/ sets (NAME=<digit> or ct_tuning.NAME):$unused"
fi

# ---- (c) bad knobs are errors that name them ------------------------------------------------
M="$SRC/models/fmnist_cnn.yml"
# refused PATTERN ENV... -- ARGS...: cnnc with ENV (VAR=value items) and ARGS exits non-zero,
# its stderr matches PATTERN, and writes no .so
refused() {
  local pat=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$T/bad.so"
  env ${envs[@]+"${envs[@]}"} "$CNNC" "$@" -o "$T/bad.so" >"$T/bad.out" 2>&1
  local rc=$?
  if [ "$rc" != 0 ] && grep -qE -- "$pat" "$T/bad.out" && [ ! -e "$T/bad.so" ]; then ok; else
    bad "cnnc ${envs[*]+${envs[*]} }$*: exit $rc, want non-zero and /$pat/: $(head -c 400 "$T/bad.out")"
  fi
}
refused "unknown tune knob 'nosuch'" -- "$M" --tune nosuch=1
refused "knob 'winograd' takes 0 or 1 \(got '2'\)" -- "$M" --tune winograd=2
refused "item 'winograd' is not name=value" -- "$M" --tune winograd
refused "unknown tune knob 'nosuch'" CNNC_TUNE=nosuch=1 -- "$M"
grep -q "CNNC_TUNE='nosuch=1'" "$T/bad.out" && ok || bad "CNNC_TUNE=nosuch=1: the error does not name CNNC_TUNE: $(head -c 400 "$T/bad.out")"
refused "knob 'dyn_parts' takes a whole number in 1\.\.64 \(got '0'\)" -- "$M" --tune dyn_parts=0
cat >"$T/y5.yml" <<'Y'
name: tune_yaml
input: {shape: [1, 8, 8], dtype: f32, classes: 3}
compile:
  batch_size: 2
  tune: {winograd: 5}
layers:
  - {name: c, op: conv, filters: 4, kernel: 3, padding: 1}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 3}
Y
refused "y5\.yml:5:[0-9]+: error: .*knob 'winograd' takes 0 or 1 \(got '5'\)" -- "$T/y5.yml"

# ---- (d), (e) the .so's options JSON records every knob -------------------------------------
# build NAME ENV... -- ARGS...: $T/NAME.so from fmnist_cnn, then its options' tune map as JSON
# in $T/NAME.tune (from cnnrun info)
build() {
  local n=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  if env ${envs[@]+"${envs[@]}"} "$CNNC" "$@" -o "$T/$n.so" >"$T/$n.out" 2>&1 &&
    "$CNNRUN" "$T/$n.so" info >"$T/$n.info" 2>&1 &&
    "$PY" -c "
import json, sys
o = [l for l in open(sys.argv[1]) if l.startswith('options ')]
json.dump(json.loads(o[0][len('options '):])['tune'], open(sys.argv[2], 'w'))" "$T/$n.info" "$T/$n.tune"; then
    ok
  else
    bad "$n: cnnc ${envs[*]+${envs[*]} }$* / cnnrun info: $(tail -c 400 "$T/$n.out" "$T/$n.info" 2>/dev/null)"
  fi
}
# recorded NAME KNOB=VALUE...: $T/NAME.tune has every knob of ir/tuning.def, each at its
# default except the given ones
recorded() {
  local n=$1
  shift
  if "$PY" - "$DEF" "$T/$n.tune" "$@" >"$T/py.out" 2>&1 <<'P'; then ok; else bad "$n: $(cat "$T/py.out")"; fi
import json, re, sys
want = {k: int(d) for k, d in re.findall(r'^TUNE\((\w+),\s*\w+,\s*(-?\d+),', open(sys.argv[1]).read(), re.M)}
for kv in sys.argv[3:]:
    k, v = kv.split("=")
    assert k in want, k
    want[k] = int(v)
got = json.load(open(sys.argv[2]))
if got != want:
    diff = sorted(set(got) ^ set(want)) + [f"{k}: {got[k]} (want {want[k]})" for k in want if k in got and got[k] != want[k]]
    sys.exit("recorded knobs differ: " + ", ".join(map(str, diff)))
P
}
build def -- "$M"
recorded def
build cli -- "$M" --tune winograd=0
recorded cli winograd=0
grep -q '"winograd": 0' "$T/cli.info" && grep -q '"sched_huge_region": 200' "$T/cli.info" && ok ||
  bad "cnnrun info lacks \"winograd\": 0 or \"sched_huge_region\": 200: $(grep options "$T/cli.info" | head -c 600)"
build env CNNC_TUNE=winograd=0 -- "$M"
recorded env winograd=0
build both CNNC_TUNE=winograd=0,kernel_share=0 -- "$M" --tune winograd=1
recorded both kernel_share=0
sed 's/winograd: 5/winograd: 0/' "$T/y5.yml" >"$T/y0.yml"
build yml -- "$T/y0.yml"
recorded yml winograd=0
build ymlcli -- "$T/y0.yml" --tune winograd=1
recorded ymlcli
finish
