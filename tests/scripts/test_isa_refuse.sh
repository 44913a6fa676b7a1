#!/usr/bin/env bash
# test_isa_refuse.sh BUILD SRC — a .so compiled for AVX-512 CPUs (--target-cpu znver4,
# skylake-avx512, or --target-features +avx512f,+avx512vl) declares the AVX-512 subsets LLVM
# uses for them (cnnc_isa_v1: avx512f, avx512bw, avx512dq, avx512vl, avx512bf16; codegen/cg_isa.h)
# and libcnnrt refuses it at open on a CPU that lacks any of them (runtime/rt_isa.c), with a
# message naming every missing feature — not SIGILL in a kernel.  On a CPU that has them all the
# model must run instead.  The expected missing set comes from /proc/cpuinfo.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/fmnist_cnn.yml"
FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "

# cpu_lacks FEATURE: this CPU does not have FEATURE (cnnc's name; /proc/cpuinfo says avx512_bf16)
cpu_lacks() {
  local f=$1
  [ "$f" = avx512bf16 ] && f=avx512_bf16
  [[ "$FLAGS" != *" $f "* ]]
}

# refused NAME FEATURES -- CNNC-ARGS...: compiled with CNNC-ARGS, the .so needs FEATURES; cnnrun
# refuses it naming each of them this CPU lacks (or runs it when none is missing).
refused() {
  local name=$1 needs=$2
  shift 3
  cnnc_as "$name" "$M" --batch-size 2 "$@" -o "$T/$name.so" || return
  local missing=()
  for f in $needs; do cpu_lacks "$f" && missing+=("$f"); done
  if [ ${#missing[@]} = 0 ]; then
    expect 0 "img/s|latency" -- "$T/$name.so" benchmark --batches 1 --runs 1 --warmup 0
    return
  fi
  for cmd in info benchmark; do
    expect 1 "$name.so: compiled for CPU features this CPU lacks: " -- "$T/$name.so" $cmd
    for f in "${missing[@]}"; do
      grep -q "lacks: [a-z0-9, ]*\b$f\b" "$T/out" && ok || bad "$name $cmd: the message does not name $f: $(head -c 400 "$T/out")"
    done
  done
  echo "$name: $(head -c 300 "$T/out")"
}

refused znver4 "avx512f avx512bw avx512dq avx512vl avx512bf16" -- --target-cpu znver4
refused skylake "avx512f avx512bw avx512dq avx512vl" -- --target-cpu skylake-avx512
refused bf16 "avx512f avx512bw avx512dq avx512vl avx512bf16" -- --target-cpu znver4 --precision 16.16
refused f_vl "avx512f avx512vl" -- --target-features +avx,+avx2,+fma,+f16c,+avx512f,+avx512vl
# no AVX-512 subset is declared for a bare avx512f target
cnnc_as f "$M" --batch-size 2 --target-features +avx,+avx2,+fma,+avx512f -o "$T/f.so"
if cpu_lacks avx512f; then
  expect 1 "lacks: avx512f \(the model needs avx,avx2,fma,f16c,avx512f;" -- "$T/f.so" info
fi
# the host build runs
cnnc_as h "$M" --batch-size 2 -o "$T/h.so"
expect 0 "img/s|latency" -- "$T/h.so" benchmark --batches 1 --runs 1 --warmup 0
finish
