#!/usr/bin/env bash
# mpi_scaling.sh — data-parallel training side by side on one machine (docs/scaling.md), the
# acceptance comparison of issue 22:
#   (a) one process, 2 threads:  cnnrun X.so train --threads 2   (X.so compiled --replicas 2: both
#       replicas in one process; with batch norm they run one after the other, 2 threads each)
#   (b) 2 ranks x 1 thread:      mpirun -np 2 cnnrun X.so train --threads 1 (one replica per rank)
#   (c) PyTorch DDP (gloo), 2 processes x 1 thread: bench/ddp_torch.py
# Rounds alternate a, b, c so that the machine's load hits all three alike.  cnnc's img/s is the
# median over the log windows after the first (the first holds the warm-up) of `--json` logs,
# each window's img/s being rank 0's global img/s (all ranks' images / wall time, data loading
# included); the peer's is its own JSON.  Prints one line per run, the medians and the ratios
# b/a and b/c, and one JSON line.
#
#   bash bench/mpi_scaling.sh BUILD X.so [ROUNDS] [SIZE] [CLASSES]
#   e.g. bash bench/mpi_scaling.sh build /tmp/r18_64_b16_r2.so 3 64 1000
# X.so: cnnc M.yml --mode training --batch-size 16 --replicas 2 --optimizer momentum -o X.so, with
# M.yml's input SIZE x SIZE and CLASSES classes (the peer is built with the same).  Env:
# TORCH_PY (/usr/bin/python3), LIMIT (training samples per run, default 1024), LOGS (windows, 4),
# PEER_SECONDS (20), PEER_LOG (the peer's stderr, default /dev/null), MPIRUN_ARGS (extra mpirun options, e.g. "--mca btl tcp,self").
set -eu
BUILD=${1:?usage: mpi_scaling.sh BUILD X.so [ROUNDS] [SIZE] [CLASSES]}
SO=${2:?usage: mpi_scaling.sh BUILD X.so [ROUNDS] [SIZE] [CLASSES]}
ROUNDS=${3:-3} SIZE=${4:-64} CLASSES=${5:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
CNNRUN=$BUILD/cnnrun
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
LIMIT=${LIMIT:-1024} LOGS=${LOGS:-4} PEER_SECONDS=${PEER_SECONDS:-20}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TRAIN=(train --dataset synthetic --no-validation --epochs 1 --limit "$LIMIT" --logs-per-epoch "$LOGS" --json)

# median img/s of the log windows after the first
cnnc_ips() {
  grep '"event": "log"' | sed -E 's/.*"images_per_second": ([0-9.]+).*/\1/' | tail -n +2 | sort -g |
    awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'
}
load() { cut -d' ' -f1 /proc/loadavg; }
med() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(date -u +%FT%TZ)"
echo "# $SO, ${SIZE}x${SIZE}, $CLASSES classes, batch 16 per replica/process; $ROUNDS rounds a,b,c"
A=() B=() C=()
for r in $(seq 1 "$ROUNDS"); do
  l=$(load); a=$("$CNNRUN" "$SO" "${TRAIN[@]}" --threads 2 | cnnc_ips)
  echo "round $r  (a) 1 proc x 2 threads (replicas 2)    $a img/s  (load $l)"; A+=("$a")
  # shellcheck disable=SC2086
  l=$(load); b=$(mpirun --oversubscribe ${MPIRUN_ARGS:-} -np 2 "$CNNRUN" "$SO" "${TRAIN[@]}" --threads 1 | cnnc_ips)
  echo "round $r  (b) mpirun -np 2 x 1 thread            $b img/s  (load $l)"; B+=("$b")
  l=$(load)
  # a fresh port per run (a worker that cannot bind leaves the other waiting), and a time limit
  c=$(timeout 900 "$TORCH_PY" "$HERE/ddp_torch.py" --procs 2 --threads 1 --batch 16 --size "$SIZE" --classes "$CLASSES" \
      --seconds "$PEER_SECONDS" --port $((29500 + 100 * r + RANDOM % 100)) 2>>"${PEER_LOG:-/dev/null}" |
      grep images_per_second | sed -E 's/.*"images_per_second": ([0-9.]+).*/\1/' || true)
  [ -n "$c" ] || c=nan
  echo "round $r  (c) torch DDP gloo 2 proc x 1 thread   $c img/s  (load $l)"; C+=("$c")
done
ma=$(printf '%s\n' "${A[@]}" | med) mb=$(printf '%s\n' "${B[@]}" | med) mc=$(printf '%s\n' "${C[@]}" | med)
rba=$(awk -v x="$mb" -v y="$ma" 'BEGIN {printf "%.3f", x / y}')
rbc=$(awk -v x="$mb" -v y="$mc" 'BEGIN {printf "%.3f", x / y}')
echo "median  (a) $ma  (b) $mb  (c) $mc img/s;  b/a = $rba (acceptance >= 0.9),  b/c = $rbc (acceptance >= 1.5)"
echo "{\"a_img_s\": $ma, \"b_img_s\": $mb, \"c_img_s\": $mc, \"b_over_a\": $rba, \"b_over_c\": $rbc, \"rounds\": $ROUNDS, \"size\": $SIZE, \"classes\": $CLASSES}"
