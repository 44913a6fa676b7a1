#!/usr/bin/env bash
# test_plan_golden.sh BUILD_DIR SRC_DIR [--update] — kernel-plan goldens: for every case of
# tests/golden/plan/cases.txt ("NAME | MODEL | ARGS"), `cnnc models/MODEL.yml --emit plan ARGS`
# must equal tests/golden/plan/NAME.plan.  A plan names each kernel's route, tile, fused
# nodes, 16-bit operands and ISA, so a change of kernel choice shows here without running
# anything; every case pins its target and cache sizes, so the plans are the same on any host.
# Every row of codegen/kernels.def must be taken in some golden of its kind of graph.
# --update rewrites the goldens from the current output (review the diff).  CNNC_TEST_QUICK=1
# (.ci/run's sanitizer stage only; the default suite runs every case): every second case.  The
# last line is "N passed, M failed".
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR SRC_DIR [--update]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
SRC=$(cd "$2" && pwd) || exit 2
UPDATE=0
[ "${3:-}" = "--update" ] && UPDATE=1
CNNC="$BUILD/cnnc"
cd "$SRC" || exit 2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0 k=0
QUICK=0
[ -n "${CNNC_TEST_QUICK:-}" ] && [ "$CNNC_TEST_QUICK" != 0 ] && [ "$UPDATE" = 0 ] && QUICK=1
while IFS='|' read -r name model args; do
  name=$(echo "$name" | xargs); model=$(echo "$model" | xargs)
  case "$name" in ''|'#'*) continue ;; esac
  k=$((k + 1))
  [ "$QUICK" = 1 ] && [ $((k % 2)) = 0 ] && continue
  want=tests/golden/plan/$name.plan
  # shellcheck disable=SC2086
  if ! timeout 300 "$CNNC" "models/$model.yml" --emit plan $args -o "$TMP/out" 2> "$TMP/err"; then
    echo "FAIL $name: cnnc exited non-zero"; sed 's/^/    /' "$TMP/err"; failed=$((failed + 1)); continue
  fi
  if [ "$UPDATE" = 1 ]; then
    cp "$TMP/out" "$want"; passed=$((passed + 1))
  elif [ -f "$want" ] && diff -u "$want" "$TMP/out" > "$TMP/diff"; then
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    if [ -f "$want" ]; then sed 's/^/    /' "$TMP/diff" | head -40; else echo "    missing $want (run with --update)"; fi
    failed=$((failed + 1))
  fi
done < tests/golden/plan/cases.txt
# every row of codegen/kernels.def is taken somewhere in the goldens (inference rows in
# inference plans, training rows in training plans), so each route's choice is pinned
if [ "$UPDATE" = 0 ]; then
  if missing=$(python3 - "$SRC" <<'EOF'
import glob, re, sys
src = sys.argv[1]
rows = re.findall(r"^KROUTE\((\w+),\s*(\w+),\s*(INFER|TRAIN),", open(f"{src}/codegen/kernels.def").read(), re.M)
seen = set()
for path in glob.glob(f"{src}/tests/golden/plan/*.plan"):
    text = open(path).read()
    graphs = "TRAIN" if ", training;" in text.split("\n", 1)[0] else "INFER"
    for route, kind in re.findall(r" -> (\w+): (\S+)", text):
        op = next((o for o in ("conv2d_grad_input", "conv2d_grad_weight") if kind.startswith(o)), kind.split("_")[0])
        seen.add((op, route, graphs))
miss = [f"{op} {route} {g}" for op, route, g in rows if (op, route, g) not in seen]
print(", ".join(miss))
sys.exit(1 if miss or not rows else 0)
EOF
  ); then passed=$((passed + 1))
  else echo "FAIL kernels.def rows no golden takes: $missing"; failed=$((failed + 1)); fi
fi
# a plan must be able to change: the Winograd route off changes ResNet-50's 3x3 kernels
"$CNNC" models/resnet50.yml --emit plan --target-cpu skylake-avx512 --target-cache 1M,32M --tune winograd=0 -o "$TMP/nw" 2>/dev/null
if grep -q wino "$TMP/nw" || ! grep -q wino "tests/golden/plan/resnet50.avx512.b1.plan"; then
  echo "FAIL winograd=0 did not change the plan's Winograd kernels"; failed=$((failed + 1))
else
  passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
