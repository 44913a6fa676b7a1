/* compile.h — a whole compile as one call, for cnnc and the tests: check the options,
 * resolve the tuning knobs (the graph's, then o's --tune items), run the graph passes
 * (passes/pipeline.c), create the target (o's --target-cpu/-features/--mtriple/--target-cache)
 * and hand the graph to codegen. */
#ifndef CNNC_TOOLS_COMPILE_H
#define CNNC_TOOLS_COMPILE_H

#include "codegen/cg.h"
#include "frontend/fe.h"

/* Compiles g with options o to output (a .so), or dumps emit ("llvm", "asm", "obj", "plan",
 * "ir-after=PASS") to output.  Prints progress to stderr when verbose.  Returns 0 or -1 with
 * d filled. */
int cnnc_build_model(ir_graph *g, const fe_options *o, const char *output, const char *emit, int verbose, ir_diag *d);
/* Same, reporting the layout and phase times ("split", "codegen", "link") to report (may be NULL). */
int cnnc_build_model_report(ir_graph *g, const fe_options *o, const char *output, const char *emit, int verbose,
                            const cg_report_sink *report, ir_diag *d);

#endif
