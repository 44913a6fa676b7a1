/* report.h — the compile report (docs/reports.md): collected from what codegen planned (the
 * cg_report_sink it fills), written as JSON and self-contained HTML, and compared between two
 * compiles (cnnc report-diff).  It consumes the compile's results; it is not a pass.  Prefix:
 * rp_. */
#ifndef CNNC_TOOLS_REPORT_H
#define CNNC_TOOLS_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

typedef struct rp_report rp_report;
struct cg_report_sink;
/* An empty report of g (g must outlive it); memory_limit: per-shard bytes, 0 = none.  The
 * caller owns it (rp_report_free). */
rp_report *rp_report_new(const ir_graph *g, int64_t memory_limit);
void rp_report_free(rp_report *r);
/* --available-memory-proportion text (one value, or one per shard; must outlive r): the
 * per-op working-set budgets in the report.  NULL = the default. */
void rp_report_set_proportion(rp_report *r, const char *amp);
/* Training options of the compile (--gradient-accumulation, --replicas, --pipeline-schedule,
 * --recompute; strings must outlive r): the report's schedule simulation.  Defaults 1, 1,
 * "sequential", "none". */
void rp_report_set_training(rp_report *r, int grad_accum, int replicas, const char *schedule, const char *recompute);
/* --enable-half-partials: the 16-bit type (must outlive r), NULL = off: the report states where
 * partial sums are stored in 16 bits ("half_partials", docs/precision.md). */
void rp_report_set_half_partials(rp_report *r, const char *half_type);
/* Fills *sink (the caller's) so that cnnc_build_model_report fills r. */
void rp_report_sink(rp_report *r, struct cg_report_sink *sink);
/* Adds seconds to phase name ("load", "split", "codegen", "link", ...). */
void rp_report_phase(rp_report *r, const char *name, double seconds);
/* Write the report to f.  Return 0, or -1 when nothing was compiled or on a write error. */
int rp_report_write_json(const rp_report *r, FILE *f);
int rp_report_write_html(const rp_report *r, FILE *f);
/* Prints what changed from report JSON file a to b to out.  Returns 0, or -1 with a message
 * in err (unreadable or malformed file). */
int rp_report_diff(const char *a, const char *b, FILE *out, char *err, size_t err_size);

#endif
