#!/usr/bin/env python3
"""Writes docs/tuning.md from ir/tuning.def (the table is the source; run after editing it):
    python3 tools/gen_tuning_doc.py [--check]
--check exits 1 when docs/tuning.md differs from what the table gives."""
import os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = """# Tuning knobs

Every code-generation knob is one row of `ir/tuning.def` (type, default, range, help); this page
is generated from it (`python3 tools/gen_tuning_doc.py`).  The defaults are what the benchmarks
measured best (bench/RESULTS.md); every other value is an A/B experiment or a test switch, and
each knob is exercised by a test (`tests/scripts/test_tuning_table.sh` fails on a row that no
test names).

* **Set**: `cnnc --tune name=value[,name=value...]`; in a model file, `compile: {tune: {name:
  value}}`; for scripts, `CNNC_TUNE=name=value,...` in cnnc's environment, read as if given
  first with `--tune`.  Later items win; `--tune` (or `CNNC_TUNE`) replaces the model file's
  `tune:` like any other list option.  A bad name or value is an error naming the knob (and, in
  a model file, the line).
* **Read**: passes and generators read them from the graph, `ir_tune(g)->name` (in codegen
  `cg_tune(c)`); nothing in `codegen/`, `passes/` or `runtime/` reads the environment.
* **Recorded**: the `.so`'s options JSON holds every knob's value (`"tune": {...}`, printed by
  `cnnrun X.so info`).
* **Listed**: `cnnc --help-tune`.

Adding a knob: docs/contributing.md.
"""


def render():
    out = [HEAD]
    for line in open(os.path.join(ROOT, "ir", "tuning.def")):
        m = re.match(r"/\* ---- (.*?) -+ \*/", line)
        if m:
            title = m.group(1)
            out.append("\n## %s\n\n| knob | values | default | what it does |\n|---|---|---|---|\n" % (title[0].upper() + title[1:]))
            continue
        m = re.match(r'TUNE\((\w+),\s*(\w+),\s*(-?\d+),\s*(-?\d+),\s*(-?\d+),\s*"(.*)"\)', line.strip())
        if m:
            f, t, d, lo, hi, h = m.groups()
            vals = "0, 1" if t == "BOOL" else "%s..%s" % (lo, hi)
            out.append("| `%s` | %s | %s | %s |\n" % (f, vals, d, h.replace('\\"', '"')))
    return "".join(out)


def main():
    path = os.path.join(ROOT, "docs", "tuning.md")
    text = render()
    if "--check" in sys.argv[1:]:
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            print("docs/tuning.md is out of date: run python3 tools/gen_tuning_doc.py")
            return 1
        return 0
    open(path, "w").write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
