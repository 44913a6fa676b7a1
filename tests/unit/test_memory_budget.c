/* test_memory_budget.c — codegen/cg_budget.c and passes/memory_limit.c alone: cache sizes from
 * a fake sysfs tree (and the fallbacks), the working-set budget formula, proportions per shard
 * and their count check, and the --memory-limit check on hand-made records of a small graph
 * (fits at exactly the counted bytes, fails one byte below with the shard, peak step, the
 * largest live tensors and the hints in the message). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/cg_budget.h"
#include "passes/passes.h"
#include "tests/unit/check.h"

static void put(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void cache_index(const char *root, int i, const char *level, const char *type, const char *size, const char *cpus) {
  char d[512];
  snprintf(d, sizeof d, "%s/cpu0", root), mkdir(d, 0755);
  snprintf(d, sizeof d, "%s/cpu0/cache", root), mkdir(d, 0755);
  snprintf(d, sizeof d, "%s/cpu0/cache/index%d", root, i), mkdir(d, 0755);
  put(d, "level", level), put(d, "type", type), put(d, "size", size), put(d, "shared_cpu_list", cpus);
}

static void test_cache_sizes(void) {
  char root[] = "/tmp/cnnc-sysfs-XXXXXX";
  if (!mkdtemp(root)) {
    CHECK(0, "mkdtemp");
    return;
  }
  cg_cache_sizes c;
  CHECK(cg_cache_sizes_sysfs(root, &c) == -1 && c.l2 == CG_FALLBACK_L2 && c.l3 == CG_FALLBACK_L3_PER_CORE &&
            c.from_sysfs == 0,
        "no cache entries: -1 and the fallbacks");
  cache_index(root, 0, "1\n", "Data\n", "32K\n", "0\n");
  cache_index(root, 1, "1\n", "Instruction\n", "32K\n", "0\n");
  cache_index(root, 2, "2\n", "Unified\n", "1024K\n", "0-1\n");
  cache_index(root, 3, "3\n", "Unified\n", "32768K\n", "0-3,8-11\n");
  CHECK(cg_cache_sizes_sysfs(root, &c) == 0 && c.from_sysfs == 1, "sysfs read");
  CHECK(c.l2 == 1024 * 1024 && c.l2_sharing == 2 && c.l3 == 32 * 1024 * 1024 && c.l3_sharing == 8,
        "l2 %lld/%d l3 %lld/%d", (long long)c.l2, c.l2_sharing, (long long)c.l3, c.l3_sharing);
  /* P x (L2/2 + L3/8) = 0.5 x (512 KiB + 4 MiB) */
  CHECK(cg_tile_budget(&c, 0.5) == 256 * 1024, "tile budget %lld", (long long)cg_tile_budget(&c, 0.5));
  CHECK(cg_working_set_budget(&c, 0.5) == 256 * 1024 + 2 * 1024 * 1024, "working-set budget %lld",
        (long long)cg_working_set_budget(&c, 0.5));
  CHECK(cg_working_set_budget(&c, 0.3) < cg_working_set_budget(&c, 0.6), "a lower P gives a smaller budget");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0, "cleanup");
  cg_cache_sizes_for(NULL, &c); /* the host: sysfs or the fallbacks, never zero */
  CHECK(c.l2 > 0 && c.l2_sharing >= 1 && c.l3_sharing >= 1, "host cache sizes");
  CHECK(cg_shard_tile_budget(NULL, "0.6,0.3", 1) == cg_tile_budget(&c, 0.3) &&
            cg_shard_working_set_budget(NULL, NULL, 0) == cg_working_set_budget(&c, 0.6),
        "per-shard helpers");
  /* --target-cache: the host is an input; the target's sizes win over detection */
  cg_target t = {0};
  ir_diag d = {0};
  CHECK(cg_target_set_cache(&t, "1M,2M", &d) == 0 && t.cache.l2 == 1 << 20 && t.cache.l3 == 2 << 20 &&
            t.cache.from_sysfs == 2,
        "--target-cache 1M,2M: l2 %lld l3 %lld", (long long)t.cache.l2, (long long)t.cache.l3);
  cg_cache_sizes_for(&t, &c);
  CHECK(c.l2 == 1 << 20 && cg_shard_tile_budget(&t, "0.5", 0) == 512 * 1024, "target cache sizes used: l2 %lld",
        (long long)c.l2);
  CHECK(cg_target_set_cache(&t, "512K,0", &d) == 0 && t.cache.l2 == 512 * 1024 && t.cache.l3 == 0, "512K,0");
  const char *bad[] = {"", "2M", "1K,2M", "2M,", "2M,4M,1", "x,1", "2Q,1", "99999999999G,1"};
  for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
    ir_diag e = {0};
    CHECK(cg_target_set_cache(&t, bad[i], &e) == -1 && strstr(e.msg, "--target-cache"), "'%s' accepted", bad[i]);
  }
}

static void test_proportions(void) {
  CHECK(cg_budget_proportion(NULL, 3) == CG_DEFAULT_PROPORTION && cg_budget_proportion("", 0) == 0.6, "default 0.6");
  CHECK(cg_budget_proportion("0.25", 0) == 0.25 && cg_budget_proportion("0.25", 5) == 0.25, "one value for every shard");
  CHECK(cg_budget_proportion("0.6,0.3,1", 0) == 0.6 && cg_budget_proportion("0.6,0.3,1", 1) == 0.3 &&
            cg_budget_proportion("0.6,0.3,1", 2) == 1.0,
        "one per shard");
  ir_diag d = {0};
  CHECK(cg_budget_check_proportions("0.6", 4, &d) == 0 && cg_budget_check_proportions("0.6,0.3", 2, &d) == 0, "counts ok");
  CHECK(cg_budget_check_proportions("0.6,0.3", 3, &d) == -1 && strstr(d.msg, "gives 2 values but the model has 3 shards"),
        "count mismatch: %s", d.msg);
  d = (ir_diag){0};
  CHECK(cg_budget_check_proportions("0.6,0", 2, &d) == -1 && strstr(d.msg, "value 2"), "range: %s", d.msg);
}

/* input [1,1,1,256] f32 -> a -> b -> c -> d (relu chain), one shard of four steps. */
static void test_limit_check(void) {
  ir_graph *g = ir_graph_new("chain", 1);
  ir_diag d = {0};
  int x = ir_add_input(g, "x", IR_F32, (ir_shape){4, {1, 1, 1, 256}});
  const char *names[] = {"a", "b", "c", "d"};
  int v[4], prev = x;
  for (int i = 0; i < 4; i++) v[i] = prev = ir_add_node(g, IR_OP_relu, names[i], (ir_loc){"m.yml", 10 + i, 3}, &prev, 1, NULL, &d);
  CHECK(v[3] >= 0, "graph: %s", d.msg);
  g->outputs[g->n_outputs++] = v[3];
  g->n_shards = 1;
  /* scratch: a (steps 0-1) and b (1-2) and c (2-2, only 1 KiB); io: x and d */
  pass_usage u[3] = {{0, 1, 1024, 64, 0}, {1, 2, 1024, 64, 0}, {2, 2, 1024, 64, 0}};
  int uv[3] = {v[0], v[1], v[2]}, steps[4] = {0, 1, 2, 3};
  int64_t arena = pass_plan_memory(u, 3);
  pass_mem_shard s = {4, steps, u, uv, 3, arena, 2048, 0, 0};
  int64_t need = pass_mem_counted(&s);
  CHECK(arena == 2048 && need == 4096, "arena %lld need %lld", (long long)arena, (long long)need);
  CHECK(pass_memory_limit_check(g, &s, 1, 0, &d) == 0, "no limit");
  CHECK(pass_memory_limit_check(g, &s, 1, need, &d) == 0, "exactly the need fits");
  CHECK(pass_memory_limit_check(g, &s, 1, need - 1, &d) == -1, "one byte less fails");
  CHECK(!strcmp(d.layer, "b") && d.loc.line == 11, "located at the first peak step's layer 'b' (got '%s' line %d)", d.layer,
        d.loc.line);
  CHECK(strstr(d.msg, "shard 0 needs 4.0 KiB (arena 2.0 KiB + io 2.0 KiB), 1 B over --memory-limit") &&
            strstr(d.msg, "peak at step 1 with 2.0 KiB of activations live, largest: 'a' 1.0 KiB, 'b' 1.0 KiB") &&
            strstr(d.msg, "--shards 2 or more") && strstr(d.msg, "a pipeline split at 'c'") && !strstr(d.msg, "recompute"),
        "message: %s", d.msg);
  ir_graph_free(g);
}

/* The split hint names a model layer, never a node a pass inserted: x -> a -> b -> b/store16
 * (narrow16) -> b/load16/c (widen16) -> c -> d, six steps; the middle one (3) is the widen16,
 * so the hint moves on to 'c'. */
static void test_limit_hint_skips_inserted(void) {
  ir_graph *g = ir_graph_new("chain16", 1);
  ir_diag d = {0};
  int x = ir_add_input(g, "x", IR_F32, (ir_shape){4, {1, 1, 1, 256}});
  ir_loc loc = {"m.yml", 10, 3};
  int a = ir_add_node(g, IR_OP_relu, "a", loc, &x, 1, NULL, &d);
  int b = ir_add_node(g, IR_OP_relu, "b", loc, &a, 1, NULL, &d);
  ir_attr na = {.narrow16 = {IR_HALF_BF16, 0}}, wa = {.widen16 = {IR_HALF_BF16, 0}};
  int h = ir_add_node(g, IR_OP_narrow16, "b/store16", loc, &b, 1, &na, &d);
  int w = ir_add_node(g, IR_OP_widen16, "b/load16/c", loc, &h, 1, &wa, &d);
  int c = ir_add_node(g, IR_OP_relu, "c", loc, &w, 1, NULL, &d);
  int e = ir_add_node(g, IR_OP_relu, "d", loc, &c, 1, NULL, &d);
  CHECK(e >= 0, "graph: %s", d.msg);
  g->outputs[g->n_outputs++] = e;
  g->n_shards = 1;
  pass_usage u[2] = {{0, 5, 4096, 64, 0}, {1, 5, 4096, 64, 0}};
  int uv[2] = {a, b}, steps[6];
  for (int i = 0; i < 6; i++) steps[i] = i;
  CHECK(!strcmp(g->nodes[3].name, "b/load16/c") && !strcmp(g->nodes[4].name, "c"), "node order as built");
  pass_mem_shard s = {6, steps, u, uv, 2, pass_plan_memory(u, 2), 2048, 0, 0};
  CHECK(pass_memory_limit_check(g, &s, 1, 1024, &d) == -1, "over the limit");
  CHECK(strstr(d.msg, "a pipeline split at 'c'") && !strstr(d.msg, "load16") && !strstr(d.msg, "store16'"),
        "hint names a layer: %s", d.msg);
  ir_graph_free(g);
}

int main(void) {
  test_cache_sizes();
  test_proportions();
  test_limit_check();
  test_limit_hint_skips_inserted();
  return check_done("test_memory_budget", g_failures);
}
