#!/usr/bin/env bash
# test_compile_units.sh BUILD SRC — the compile-unit plan (codegen/cg_module.c assign_units,
# docs/codegen.md "Compile time"): every group of kernels that may share a body gets its own
# compile unit (up to 32), independent of the number of threads.  Checks that
#  - the .so is reproducible: byte-identical from two compiles, and with --tune
#    compile_threads=1 and =2 (the plan does not depend on the threads) but for the options
#    JSON's record of that knob and the build ID and checksum note that hash it;
#  - the unit count is the number of kernel groups (cnnc -v: "in N units"), and the old plan
#    (--tune units_per_thread=1, 4 units per thread) is reachable and gives fewer units;
#  - the logits are bitwise the same with either plan and either thread count.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/cifar_resnet20.yml"

# build NAME ARGS...: cnnc -v with the given arguments (--tune ...), stderr in $T/NAME.log
build() {
  local n=$1
  shift
  cnnc_as "$n" "$M" -v --batch-size 2 "$@" -o "$T/$n.so" && ok
}
units() { sed -n 's/.*codegen .* in \([0-9]*\) units on \([0-9]*\) thread.*/\1 \2/p' "$T/$1.log"; }

# same_but_threads A B: A and B byte-identical once the options JSON's "compile_threads": N
# (every knob is recorded), the build ID and the seal's XXH64 (runtime/cnnc_seal.h: hashes of
# the contents) are masked in both
same_but_threads() {
  python3 - "$1" "$(readelf -n "$1" | sed -n 's/.*Build ID: //p')" "$2" "$(readelf -n "$2" | sed -n 's/.*Build ID: //p')" <<'EOF'
import re, sys
def norm(path, bid):
    b = open(path, "rb").read()
    if len(bid) < 16 or b.count(bytes.fromhex(bid)) != 1: sys.exit("%s: no build ID (%r)" % (path, bid))
    b = b.replace(bytes.fromhex(bid), bytes(len(bid) // 2))
    seal = b.find(b"\x05\x00\x00\x00\x18\x00\x00\x00SEALcnnc\x00")  # the note; its hash: desc + 16
    if seal < 0: sys.exit("%s: no checksum note" % path)
    b = b[:seal + 36] + bytes(8) + b[seal + 44:]
    b, n = re.subn(rb'"compile_threads": [0-9]+', b'"compile_threads": N', b)
    if n != 1: sys.exit("%s: %d compile_threads records" % (path, n))
    return b
sys.exit(0 if norm(sys.argv[1], sys.argv[2]) == norm(sys.argv[3], sys.argv[4]) else 1)
EOF
}
build t2 --tune compile_threads=2
build t2b --tune compile_threads=2
build t1 --tune compile_threads=1
build old --tune compile_threads=2,units_per_thread=1
cmp -s "$T/t2.so" "$T/t2b.so" && ok || bad "two compiles with 2 threads give different .so files"
same_but_threads "$T/t2.so" "$T/t1.so" && ok || bad "1 and 2 compile threads give different .so files (beyond the recorded knob)"
read -r u2 th2 <<<"$(units t2)"
read -r u1 th1 <<<"$(units t1)"
read -r uo tho <<<"$(units old)"
[ "${th2:-}" = 2 ] && [ "${th1:-}" = 1 ] && ok || bad "--tune compile_threads not honoured: '$(units t2)' / '$(units t1)'"
[ -n "${u2:-}" ] && [ "$u2" = "${u1:-}" ] && ok || bad "unit counts differ with 1 and 2 threads: $u2 / $u1"
# cifar_resnet20: more kernel groups than the old plan's 8 units, fewer than 32
[ -n "${uo:-}" ] && [ "$uo" = 8 ] && [ "$u2" -gt "$uo" ] && [ "$u2" -le 32 ] && ok ||
  bad "units: new plan $u2, old plan $uo (want old 8 < new <= 32)"
b=$(sed -n 's/.*(\([0-9]*\) distinct bodies).*/\1/p' "$T/t2.log")
bo=$(sed -n 's/.*(\([0-9]*\) distinct bodies).*/\1/p' "$T/old.log")
[ -n "$b" ] && [ "$b" = "$bo" ] && ok || bad "distinct bodies differ between the plans: $b vs $bo"

randn "$T/x.raw" 11 $((2 * 3 * 32 * 32))
for s in t2 t1 old; do infer_as "$s" "$T/x.raw"; done
same_bytes "$T/t2.y" "$T/t1.y" "logits differ with 1 and 2 threads"
same_bytes "$T/t2.y" "$T/old.y" "logits differ between the old and new unit plans"
finish
