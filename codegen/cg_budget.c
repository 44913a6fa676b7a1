/* cg_budget.c — memory budgets: cache sizes (host sysfs or documented fallbacks), the
 * working-set budget of one conv/matmul from --available-memory-proportion, the proportion of
 * each shard and the check of its count (the --memory-limit check is cg_module.c's). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_budget.h"

/* ---- cache sizes ----------------------------------------------------------------------------- */
static int read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *ok = fgets(buf, (int)n, f);
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = 0;
  return 0;
}

/* "512K", "32768K", "1M", "4096" -> bytes (0 if unreadable). */
static int64_t parse_size(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || v < 0) return 0;
  if (*end == 'K' || *end == 'k') return v * 1024;
  if (*end == 'M' || *end == 'm') return v * 1024 * 1024;
  if (*end == 'G' || *end == 'g') return v * 1024 * 1024 * 1024;
  return v;
}

/* Number of cpus in a list such as "0-1", "0,2,4-7". */
static int count_cpus(const char *s) {
  int n = 0;
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s) break;
    if (*end == '-') b = strtol(end + 1, &end, 10);
    n += b >= a ? (int)(b - a + 1) : 1;
    s = *end == ',' ? end + 1 : end;
    if (*end != ',') break;
  }
  return n > 0 ? n : 1;
}

static void fallback(cg_cache_sizes *c) {
  *c = (cg_cache_sizes){CG_FALLBACK_L2, CG_FALLBACK_L3_PER_CORE, 1, 1, 0};
}

int cg_cache_sizes_sysfs(const char *root, cg_cache_sizes *c) {
  cg_cache_sizes r = {0, 0, 1, 1, 1};
  for (int i = 0; i < 16; i++) {
    char path[512], level[16], type[32], size[32], shared[256];
    snprintf(path, sizeof path, "%s/cpu0/cache/index%d/level", root, i);
    if (read_line(path, level, sizeof level)) continue;
    snprintf(path, sizeof path, "%s/cpu0/cache/index%d/type", root, i);
    if (read_line(path, type, sizeof type) || !strcmp(type, "Instruction")) continue;
    snprintf(path, sizeof path, "%s/cpu0/cache/index%d/size", root, i);
    if (read_line(path, size, sizeof size)) continue;
    snprintf(path, sizeof path, "%s/cpu0/cache/index%d/shared_cpu_list", root, i);
    int sharing = read_line(path, shared, sizeof shared) ? 1 : count_cpus(shared);
    if (!strcmp(level, "2")) r.l2 = parse_size(size), r.l2_sharing = sharing;
    if (!strcmp(level, "3")) r.l3 = parse_size(size), r.l3_sharing = sharing;
  }
  if (r.l2 <= 0) {
    fallback(c);
    return -1;
  }
  *c = r;
  return 0;
}

void cg_cache_sizes_for(const cg_target *t, cg_cache_sizes *c) {
  if (t && t->cache.l2 > 0) *c = t->cache;
  else cg_cache_sizes_detect(t, c);
}

/* One size of --target-cache: digits with an optional K, M or G; *p advances past it. */
static int64_t cache_bytes(const char **p) {
  const char *s = *p;
  int64_t v = 0;
  if (*s < '0' || *s > '9') return -1;
  for (; *s >= '0' && *s <= '9'; s++)
    if ((v = v * 10 + (*s - '0')) > (1LL << 36)) return -1;
  if (*s == 'K') v <<= 10, s++;
  else if (*s == 'M') v <<= 20, s++;
  else if (*s == 'G') v <<= 30, s++;
  *p = s;
  return v <= (1LL << 36) ? v : -1;
}

int cg_target_set_cache(cg_target *t, const char *spec, ir_diag *d) {
  const char *p = spec ? spec : "";
  int64_t l2 = cache_bytes(&p), l3 = *p == ',' ? (p++, cache_bytes(&p)) : -1;
  if (l2 < 4096 || l3 < 0 || *p)
    return ir_diag_set(d, (ir_loc){0}, NULL, "--target-cache takes the per-core L2 and L3 sizes as L2,L3 with an optional "
                       "K, M or G, e.g. 2M,4M (L2 >= 4K, each <= 64G; got '%s')", spec ? spec : "");
  t->cache = (cg_cache_sizes){l2, l3, 1, 1, 2};
  return 0;
}

void cg_cache_sizes_detect(const cg_target *t, cg_cache_sizes *c) {
  int host = 1;
  if (t && t->triple && t->cpu) {
    char *def = LLVMGetDefaultTargetTriple(), *norm = LLVMNormalizeTargetTriple(def), *cpu = LLVMGetHostCPUName();
    host = !strcmp(t->triple, norm) && !strcmp(t->cpu, cpu);
    LLVMDisposeMessage(def), LLVMDisposeMessage(norm), LLVMDisposeMessage(cpu);
  }
  if (!host || cg_cache_sizes_sysfs("/sys/devices/system/cpu", c)) fallback(c);
}

int64_t cg_tile_budget(const cg_cache_sizes *c, double p) {
  return (int64_t)(p * (double)c->l2 / (c->l2_sharing > 0 ? c->l2_sharing : 1));
}

int64_t cg_working_set_budget(const cg_cache_sizes *c, double p) {
  double l3 = (double)c->l3 / (c->l3_sharing > 0 ? c->l3_sharing : 1);
  return cg_tile_budget(c, p) + (int64_t)(p * l3);
}

int64_t cg_shard_working_set_budget(const cg_target *t, const char *amp, int shard) {
  cg_cache_sizes c;
  cg_cache_sizes_for(t, &c);
  return cg_working_set_budget(&c, cg_budget_proportion(amp, shard));
}

int64_t cg_shard_tile_budget(const cg_target *t, const char *amp, int shard) {
  cg_cache_sizes c;
  cg_cache_sizes_for(t, &c);
  return cg_tile_budget(&c, cg_budget_proportion(amp, shard));
}

/* ---- --available-memory-proportion per shard -------------------------------------------------- */
double cg_budget_proportion(const char *text, int shard) {
  if (!text || !*text) return CG_DEFAULT_PROPORTION;
  const char *p = text;
  double first = strtod(p, NULL);
  for (int i = 0; i < shard; i++) {
    p = strchr(p, ',');
    if (!p) return first; /* one value for every shard */
    p++;
  }
  double v = strtod(p, NULL);
  return v > 0 && v <= 1 ? v : CG_DEFAULT_PROPORTION;
}

int cg_budget_check_proportions(const char *text, int n_shards, ir_diag *d) {
  if (!text || !*text) return 0;
  int n = 1;
  for (const char *p = text; *p; p++) n += *p == ',';
  if (n != 1 && n != n_shards)
    return ir_diag_set(d, (ir_loc){0}, NULL,
                       "--available-memory-proportion '%s' gives %d values but the model has %d shard%s: give one value "
                       "(used by every shard) or one per shard",
                       text, n, n_shards, n_shards == 1 ? "" : "s");
  const char *p = text;
  for (int s = 0; s < n; s++) {
    char *end;
    errno = 0;
    double x = strtod(p, &end);
    if (end == p || errno || !(x > 0 && x <= 1) || (*end && *end != ','))
      return ir_diag_set(d, (ir_loc){0}, NULL, "--available-memory-proportion: value %d of '%s' is not in (0, 1]", s + 1,
                         text);
    p = *end ? end + 1 : end;
  }
  return 0;
}
