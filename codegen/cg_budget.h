/* cg_budget.h — memory budgets of a compile (docs/cli.md, docs/reports.md):
 *  - the working-set budget of one conv/matmul from --available-memory-proportion P and the
 *    target's cache sizes (for kernels that block for the cache; see what uses it in
 *    docs/reports.md), and P per shard from the option's text;
 *  - the --memory-limit check before code generation (the plan as passes/memory_limit.c
 *    records; it plans the layout as cg_compile does, so it is cg_module.c's). */
#ifndef CNNC_CG_BUDGET_H
#define CNNC_CG_BUDGET_H

#include <stdint.h>

#include "codegen/cg.h"

/* Fallbacks for targets other than the host, and for hosts without sysfs cache entries:
 * 512 KiB of L2 per core and 2 MiB of L3 per core (a typical x86-64 server core). */
#define CG_FALLBACK_L2 (512 * 1024)
#define CG_FALLBACK_L3_PER_CORE (2 * 1024 * 1024)
#define CG_DEFAULT_PROPORTION 0.6

/* Reads cpu0's unified/data L2 and L3 from root (normally "/sys/devices/system/cpu"):
 * cache/index*\/{level,type,size,shared_cpu_list}.  Returns 0, or -1 when no L2 was found
 * (c then holds the fallbacks). */
int cg_cache_sizes_sysfs(const char *root, cg_cache_sizes *c);
/* The cache sizes code for t will meet: t->cache (cg_target_init fills it: the host's from
 * sysfs when t is the host — its triple and cpu are LLVM's host ones — else the fallbacks;
 * --target-cache sets it, cg_target_set_cache); t NULL = the host's. */
void cg_cache_sizes_for(const cg_target *t, cg_cache_sizes *c);
/* The detection behind cg_target_init: sysfs for the host target (or t NULL), else fallbacks. */
void cg_cache_sizes_detect(const cg_target *t, cg_cache_sizes *c);

/* The bytes one conv/matmul's working set (the input, weight and output blocks it keeps
 * hot, and any temporaries) may use on one core: p * (L2 per core + L3 per core), where a
 * cache shared by k cpus counts 1/k per core.  p in (0, 1]. */
int64_t cg_working_set_budget(const cg_cache_sizes *c, double p);
/* The L2 part alone, p * L2 per core: the budget for an inner (register/L2) tile. */
int64_t cg_tile_budget(const cg_cache_sizes *c, double p);

/* For generators: the working-set / tile budget of an op in shard `shard` compiled for t, with
 * amp the option text (cg_options.available_memory_proportion; NULL = 0.6).  Reads the cache
 * sizes each call (cg_cache_sizes_for). */
int64_t cg_shard_working_set_budget(const cg_target *t, const char *amp, int shard);
int64_t cg_shard_tile_budget(const cg_target *t, const char *amp, int shard);

/* P of shard s from the option text ("0.6" for every shard, or "0.6,0.3,..." one per shard;
 * NULL or "" = CG_DEFAULT_PROPORTION).  Assumes the text passed cg_budget_check_proportions. */
double cg_budget_proportion(const char *text, int shard);
/* 0 if text gives one value or exactly n_shards values, each in (0, 1]; else -1 with d. */
int cg_budget_check_proportions(const char *text, int n_shards, ir_diag *d);

/* Before code generation, g split into shards: checks the --available-memory-proportion count
 * amp (the option text) and, when memory_limit > 0, plans the layout as codegen will (inference: the kernels'
 * scratch usage records and io; training: pass_mem_train_estimate) and fails if a shard's
 * arena + io + state exceeds the limit (pass_memory_limit_check).  Returns 0 or -1 with d.
 * (cg_module.c.) */
int cg_check_memory_budget(const ir_graph *g, int64_t memory_limit, const char *amp, ir_diag *d);


#endif
