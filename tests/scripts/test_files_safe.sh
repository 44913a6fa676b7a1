#!/usr/bin/env bash
# test_files_safe.sh BUILD SRC — files handled safely by cnnc and cnnrun (issue 26, common/cm.h):
#  * an output never overwrites an input (the same path, another path, a hard link), nor a
#    directory; outputs are checked before the work starts (cnnrun train's --trace,
#    --checkpoint-dir and test split fail before the first step);
#  * a full file system (a 256 KiB tmpfs when this may mount one, else RLIMIT_FSIZE with SIGXFSZ
#    ignored) gives a clear message, exit 1 and no file, not a partial one (cnnc -o, its
#    temporary directory, cnnrun infer --output, checkpoints), and never LLVM's "PLEASE submit a
#    bug report";
#  * temporary files PATH.tmp.PID of dead processes are removed by the next run, a live one's
#    are left alone; an output that is a device or a FIFO is written in place (a rename once
#    replaced /dev/null with a regular file), a symbolic link is followed;
#  * a FIFO, a directory or /dev/zero as an input is refused at once (no blocking, no unbounded
#    read); a gzip-bombed idx input stops at what its header promises.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
FM="$BUILD/tests/libfake_model.so"
FT="$BUILD/tests/libfake_train.so"
TO="timeout 20"

# A "full" directory $T/full: a small tmpfs, or (not root, no mount, or CNNC_TEST_FULL=rlimit)
# a plain directory where `limited` sets a file size limit of 0 (every write fails with EFBIG).
mkdir -p "$T/full"
if [ "${CNNC_TEST_FULL:-}" != rlimit ] && [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=256k tmpfs "$T/full" 2>/dev/null; then
  FULL=tmpfs
  trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
  dd if=/dev/zero of="$T/full/filler" bs=4k count=1000 2>/dev/null # fill it up to the last blocks
  limited() { $TO "$@"; }
else
  FULL=rlimit
  # (through a pipe: the limit would also stop the messages written to the log file)
  limited() {
    (ulimit -f 0; trap '' XFSZ; exec $TO "$@") 2>&1 | cat
    return "${PIPESTATUS[0]}"
  }
fi
echo "full file system: $FULL"

# run_as NAME STATUS PATTERN CMD...: CMD exits STATUS within 20 s (a shell function CMD times
# itself), its output matches PATTERN (when not empty) and holds no LLVM crash banner.
run_as() {
  local n=$1 want=$2 pat=$3
  shift 3
  if [ "$(type -t "$1")" = function ]; then "$@" >"$T/$n.out" 2>&1; else $TO "$@" >"$T/$n.out" 2>&1; fi
  local got=$?
  if [ "$got" != "$want" ]; then bad "$n: exit $got, want $want: $(head -c 600 "$T/$n.out")"
  elif [ -n "$pat" ] && ! grep -qE -- "$pat" "$T/$n.out"; then bad "$n: output lacks /$pat/: $(head -c 600 "$T/$n.out")"
  elif grep -q "PLEASE submit" "$T/$n.out"; then bad "$n: LLVM crash banner: $(head -c 600 "$T/$n.out")"
  else ok; fi
}
# no_file NAME PATH...: none of PATH exists (no output, no temporary file left)
no_file() {
  local n=$1 f
  shift
  for f in "$@"; do [ -e "$f" ] && { bad "$n: $f exists"; return; }; done
  ok
}
# A PID that no longer runs.
dead_pid() { sh -c 'echo $$'; }

cat >"$T/m.yml" <<'EOF'
name: tiny
input: {shape: [1, 8, 8], classes: 4}
layers:
  - {name: c, op: conv, filters: 8, kernel: 3, padding: 1}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 4}
EOF
cp "$T/m.yml" "$T/m.orig"

# ---- cnnc: outputs --------------------------------------------------------------------------
run_as same 1 "output '.*m.yml' is the input '.*m.yml' \(refusing to overwrite it\)" "$CNNC" "$T/m.yml" -o "$T/m.yml"
ln "$T/m.yml" "$T/link.so"
run_as hardlink 1 "output '.*link.so' is the input" "$CNNC" "$T/m.yml" -o "$T/link.so"
mkdir -p "$T/sub"
run_as otherpath 1 "is the input" "$CNNC" "$T/m.yml" -o "$T/sub/../m.yml"
: >"$T/w.safetensors" # checked before the weights are read
run_as weights_out 1 "output '.*w.safetensors' is the input '.*w.safetensors'" \
  "$CNNC" "$T/m.yml" --weights "$T/w.safetensors" -o "$T/w.safetensors"
cmp -s "$T/m.yml" "$T/m.orig" && ok || bad "the model file changed"
run_as outdir 1 "output '.*sub' is a directory" "$CNNC" "$T/m.yml" -o "$T/sub"
run_as report_dir 1 "output '.*/nodir/r.json' cannot be created: directory .*nodir: No such file" \
  "$CNNC" "$T/m.yml" -o "$T/ok.so" --report "$T/nodir/r"
no_file "no .so before a refused report" "$T/ok.so"
# the link's failed write is a fatal error inside lld (in cnnc's process: codegen/cg_lld.cpp),
# which returns to cnnc through lld's recovery point and leaves lld's state allocated (that lld
# runs no more in the process): no leak check for this one run under ASan
run_as cnnc_full 1 "error: cannot write .*(full/m.so|/unit[0-9]+.o): (No space left on device|File too large)" \
  limited env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$CNNC" "$T/m.yml" -o "$T/full/m.so"
no_file cnnc_full "$T/full/m.so" "$T/full/m.so.tmp."*
mkdir -p "$T/tmpfull"
if [ "$FULL" = tmpfs ]; then
  run_as cnnc_tmpdir_full 1 "cannot write .*full/cnnc-.*(No space left on device|File too large)" env TMPDIR="$T/full" "$CNNC" "$T/m.yml" -o "$T/tmpfull/m.so"
  no_file cnnc_tmpdir_full "$T/tmpfull/m.so" "$T/full/cnnc-"*
fi
# stale temporaries: a dead process's go, a live one's stay
mkdir -p "$T/o"
dead=$(dead_pid)
: >"$T/o/m.so.tmp.$dead"
: >"$T/o/m.so.tmp.$$"
run_as stale 0 "" "$CNNC" "$T/m.yml" -o "$T/o/m.so"
no_file "stale temporary removed" "$T/o/m.so.tmp.$dead"
[ -e "$T/o/m.so.tmp.$$" ] && ok || bad "a live process's temporary file was removed"
[ -s "$T/o/m.so" ] && ok || bad "no m.so written"

# outputs that are not regular files are written in place, never renamed over: a device (its
# own node here, not /dev/null: a regression would replace the machine's), a FIFO; a symbolic
# link is followed (the file it names is replaced, the link stays)
if [ "$(id -u)" = 0 ] && mknod "$T/nulldev" c 1 3 2>/dev/null; then
  run_as out_device 0 "" "$CNNC" "$T/m.yml" --emit ir -o "$T/nulldev"
  [ -c "$T/nulldev" ] && ok || bad "the device output was replaced: $(ls -l "$T/nulldev")"
fi
mkfifo "$T/out.fifo"
(cat "$T/out.fifo" >"$T/fifo.got") &
run_as out_fifo 0 "" "$CNNC" "$T/m.yml" --emit ir -o "$T/out.fifo"
wait
[ -p "$T/out.fifo" ] && grep -q "conv2d" "$T/fifo.got" && ok || bad "FIFO output: $(ls -l "$T/out.fifo"; head -c 200 "$T/fifo.got")"
echo old >"$T/real.so"
ln -s real.so "$T/link.so2"
run_as out_link 0 "" "$CNNC" "$T/m.yml" -o "$T/link.so2"
[ -L "$T/link.so2" ] && head -c 4 "$T/real.so" | grep -q ELF && ok || bad "symlink output: $(ls -l "$T/link.so2" "$T/real.so")"

# ---- cnnc: inputs ---------------------------------------------------------------------------
mkfifo "$T/fifo.yml" "$T/fifo.safetensors"
run_as model_fifo 1 "fifo.yml: error: cannot read the model file: is not a regular file \(a FIFO\)" "$CNNC" "$T/fifo.yml" --summary
mkdir -p "$T/dir.yml"
run_as model_dir 1 "dir.yml: error: cannot read the model file: is a directory" "$CNNC" "$T/dir.yml" --summary
run_as weights_fifo 1 "fifo.safetensors: error: cannot open weights file: is not a regular file \(a FIFO\)" \
  "$CNNC" "$T/m.yml" --weights "$T/fifo.safetensors" --summary
run_as diff_dir 1 "dir.yml: cannot read: is a directory" "$CNNC" report-diff "$T/dir.yml" "$T/dir.yml" # aborted (malloc of LONG_MAX)
run_as diff_fifo 1 "fifo.yml: cannot read: is not a regular file \(a FIFO\)" "$CNNC" report-diff "$T/fifo.yml" "$T/fifo.yml"

# ---- cnnrun infer: inputs and outputs --------------------------------------------------------
python3 - "$T" <<'PY'
import struct, sys, zlib
t = sys.argv[1]
idx = bytes([0, 0, 8, 3]) + struct.pack(">3I", 4, 4, 4) + bytes(4 * 16)  # libfake_model: 16 values a sample
open(t + "/x.idx", "wb").write(idx)
zo = zlib.compressobj(9, zlib.DEFLATED, 31); b = zo.compress(idx)
for _ in range(512): b += zo.compress(bytes(1 << 20))  # 512 MB of zeros after the 4 images
open(t + "/bomb.idx.gz", "wb").write(b + zo.flush())
PY
cp "$T/x.idx" "$T/x.orig"
run_as devzero 1 "/dev/zero: is not a regular file \(a character device\)" "$CNNRUN" "$FM" infer --input /dev/zero --top 1
mkfifo "$T/in.fifo"
run_as input_fifo 1 "in.fifo: is not a regular file \(a FIFO\)" "$CNNRUN" "$FM" infer --input "$T/in.fifo" --top 1
run_as labels_fifo 1 "in.fifo: is not a regular file \(a FIFO\)" "$CNNRUN" "$FM" infer --input "$T/x.idx" --labels "$T/in.fifo"
run_as gzbomb 1 "bomb.idx.gz: more data than its idx header promises \(80 bytes\) once decompressed" \
  "$CNNRUN" "$FM" infer --input "$T/bomb.idx.gz" --top 1
run_as out_is_in 1 "x.idx is the input '.*x.idx' \(refusing to overwrite it\)" "$CNNRUN" "$FM" infer --input "$T/x.idx" --output "$T/x.idx"
run_as out_is_model 1 "is the input '.*libfake_model.so'" "$CNNRUN" "$FM" infer --input "$T/x.idx" --output "$FM"
cmp -s "$T/x.idx" "$T/x.orig" && ok || bad "the input file changed"
run_as infer_full 1 "full/y.bin: (write error: )?(No space left on device|File too large) \(nothing was written\)" \
  limited "$CNNRUN" "$FM" infer --input "$T/x.idx" --output "$T/full/y.bin"
no_file infer_full "$T/full/y.bin" "$T/full/y.bin.tmp."*
: >"$T/o/y.bin.tmp.$dead"
run_as infer_ok 0 "4 samples, outputs written" "$CNNRUN" "$FM" infer --input "$T/x.idx" --output "$T/o/y.bin"
no_file "stale output temporary removed" "$T/o/y.bin.tmp.$dead"

# ---- cnnrun train: checks before the first step ---------------------------------------------
python3 - "$T/d" <<'PY'
import os, struct, sys
def idx(dims, data): return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data
N = 64
for case, t10k in (("good", idx([N, 28, 28], bytes(N * 784))), ("badtest", idx([N, 28, 28], bytes(N * 784 - 1)))):
    d = os.path.join(sys.argv[1], case); os.makedirs(d, exist_ok=True)
    files = {"train-images-idx3-ubyte": idx([N, 28, 28], bytes(N * 784)), "train-labels-idx1-ubyte": idx([N], bytes(N)),
             "t10k-images-idx3-ubyte": t10k, "t10k-labels-idx1-ubyte": idx([N], bytes(N))}
    for k, v in files.items(): open(os.path.join(d, k), "wb").write(v)
PY
train() { $TO "$CNNRUN" "$FT" train --dataset mnist --data-dir "$T/d/${DS:-good}" --epochs 1 "$@"; }
# before_training NAME PATTERN ARGS...: train ARGS fails (exit 1) with PATTERN before any step
before_training() {
  local n=$1 pat=$2
  shift 2
  run_as "$n" 1 "$pat" train "$@"
  grep -q "^epoch" "$T/$n.out" && bad "$n: it trained first: $(head -c 400 "$T/$n.out")" || ok
}
before_training trace_dir "nodir/t.json cannot be created: directory .*nodir: No such file" --trace "$T/nodir/t.json"
: >"$T/afile"
before_training ckpt_dir_file "--checkpoint-dir .*afile: .*(Not a directory|File exists)" --checkpoint-dir "$T/afile"
DS=badtest before_training test_split "t10k-images-idx3-ubyte: truncated"
before_training trace_is_model "is the input '.*libfake_train.so'" --trace "$FT"
# stale temporary checkpoints of killed runs are removed at the start; a live one's stay
mkdir -p "$T/ck"
: >"$T/ck/ckpt-step-00000001.safetensors.tmp.$dead"
: >"$T/ck/ckpt-step-00000001.safetensors.tmp.$$"
run_as ckpt_stale 0 "removed 1 temporary checkpoint of killed runs" train --checkpoint-dir "$T/ck"
no_file "stale checkpoint temporary removed" "$T/ck/ckpt-step-00000001.safetensors.tmp.$dead"
[ -e "$T/ck/ckpt-step-00000001.safetensors.tmp.$$" ] && ok || bad "a live process's temporary checkpoint was removed"
# a checkpoint on a full file system: a clear message, no checkpoint, no temporary file
run_as ckpt_full 1 "ckpt-step-[0-9]+.safetensors: (write error: )?(No space left on device|File too large)" \
  limited "$CNNRUN" "$FT" train --dataset mnist --data-dir "$T/d/good" --epochs 1 --checkpoint-dir "$T/full/ck"
no_file ckpt_full "$T/full/ck/ckpt-step-"*

finish
