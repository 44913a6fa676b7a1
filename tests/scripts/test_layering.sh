#!/usr/bin/env bash
# test_layering.sh [BUILD] [SRC] — the source tree's layering rules (docs/contributing.md):
#  (1) nothing in passes/ includes "codegen/..." (passes run before code generation and know
#      nothing of it);
#  (2) nothing in codegen/ includes "frontend/..." (codegen sees the IR only);
#  (3) `grep -rn getenv codegen passes runtime` finds nothing (knobs come from the graph, the
#      runtime's from cnnrt_options: only tools/ reads the environment);
#  (4) no .c or .h file is over 800 lines (build directories left out);
#  (5) the #include "..." graph among codegen's files (codegen/**/*.{c,h,def,inc}) has no
#      cycle (a header that includes, directly or through others, a header that includes it).
# Every broken rule is printed with the files (and lines) that break it.  Reads files only: it
# runs no binary, so BUILD (what ctest passes first) is not used.  SRC, the tree to check, is
# the last argument, else the tree holding this script: `test_layering.sh /some/copy` checks
# a copy (how the test itself was shown to fail, on a copy with a cyclic include).
set -u
if [ $# -ge 1 ]; then SRC=${!#}; else SRC="$(cd "$(dirname "$0")/../.." && pwd)"; fi
[ -d "$SRC/codegen" ] && [ -d "$SRC/passes" ] || { echo "test_layering.sh: $SRC is not a cnnc source tree"; exit 2; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
MAX_LINES=800
. "$(dirname "$0")/lib.sh"
cd "$SRC" || exit 2

# The tree's files, one a line: git's (tracked and untracked but not ignored) in a checkout,
# else every file below SRC but in build*/, .git, ort/, .ort/ and __pycache__/ directories.
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
  git ls-files -co --exclude-standard | while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done >"$T/files"
else
  find . \( -type d \( -name 'build*' -o -name .git -o -name ort -o -name .ort -o -name __pycache__ \) -prune \) -o \
    -type f -print | sed 's|^\./||' >"$T/files"
fi
[ -s "$T/files" ] && grep -q '^codegen/' "$T/files" && ok || bad "no files found under $SRC"

# include_hits DIR TARGET: the #include lines of the files under DIR that name TARGET/...
include_hits() {
  grep '^'"$1"'/' "$T/files" | tr '\n' '\0' | xargs -0 -r grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](\.\./)*'"$2"'/' --
}

# ---- (1), (2): includes across the layers -------------------------------------------------
hits=$(include_hits passes codegen)
[ -z "$hits" ] && ok || bad "(1) passes/ includes codegen/ headers:
$hits"
hits=$(include_hits codegen frontend)
[ -z "$hits" ] && ok || bad "(2) codegen/ includes frontend/ headers:
$hits"

# ---- (3) the environment ------------------------------------------------------------------
hits=$(grep -rn getenv codegen passes runtime)
[ -z "$hits" ] && ok || bad "(3) getenv in codegen/, passes/ or runtime/ (knobs come from the graph or cnnrt_options):
$hits"

# ---- (4) file length ----------------------------------------------------------------------
hits=$(grep -E '\.[ch]$' "$T/files" | tr '\n' '\0' | xargs -0 -r wc -l -- | awk -v max="$MAX_LINES" '$2 != "total" && $1 > max { print "  " $2 ": " $1 " lines" }')
[ -z "$hits" ] && ok || bad "(4) source files over $MAX_LINES lines:
$hits"

# ---- (5) include cycles in codegen/ -------------------------------------------------------
# An #include "x" of a codegen file resolves as the compiler does: next to the including file,
# else from SRC (the -I root); only edges to codegen files count.
hits=$(grep -E '^codegen/.*\.(c|h|def|inc)$' "$T/files" | "$PY" -c '
import os, re, sys
files = [l.strip() for l in sys.stdin if l.strip()]
known = set(files)
inc = re.compile(r"^\s*#\s*include\s*\"([^\"]+)\"")
edges = {f: [] for f in files}
for f in files:
    for no, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
        m = inc.match(line)
        if not m:
            continue
        for cand in (os.path.normpath(os.path.join(os.path.dirname(f), m.group(1))), os.path.normpath(m.group(1))):
            if cand in known:
                edges[f].append((cand, no))
                break
# Depth-first search; a grey node met again closes a cycle: print it once, as file:line hops.
WHITE, GREY, BLACK = 0, 1, 2
color = {f: WHITE for f in files}
stack, seen = [], set()
def visit(f):
    color[f] = GREY
    for to, no in edges[f]:
        stack.append((f, no))
        if color[to] == GREY:
            i = [s[0] for s in stack].index(to)
            cyc = stack[i:]
            key = frozenset(s[0] for s in cyc)
            if key not in seen:
                seen.add(key)
                print("  " + " -> ".join("%s:%d" % s for s in cyc) + " -> " + to)
        elif color[to] == WHITE:
            visit(to)
        stack.pop()
    color[f] = BLACK
sys.setrecursionlimit(10000)
for f in sorted(files):
    if color[f] == WHITE:
        visit(f)
' 2>&1)
[ -z "$hits" ] && ok || bad "(5) include cycles among codegen/ files (file:line of each #include):
$hits"

finish
