/* test_split.c — passes/split.c (pipeline splits by layer name and block prefix, ordering
 * and unknown-name errors with the closest-name suggestion, --shards N balanced by cost and
 * checked optimal against brute force) and passes/plan_memory.c (no two buffers alive at
 * the same step overlap, alignment, reuse). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "passes/passes.h"

/* A chain of relu nodes with hierarchical names (no params needed). */
static ir_graph *chain(const char *const *names, int n) {
  ir_graph *g = ir_graph_new("chain", 1);
  int v = ir_add_input(g, "x", IR_F32, (ir_shape){4, {1, 2, 3, 3}});
  for (int i = 0; i < n; i++) {
    ir_diag d = {0};
    v = ir_add_node(g, IR_OP_relu, names[i], (ir_loc){0}, &v, 1, NULL, &d);
    if (v < 0) abort();
  }
  g->outputs[g->n_outputs++] = v;
  return g;
}

static const char *const resnet_names[] = {
    "conv1", "bn1", "relu", "maxpool", "layer1/0/conv1", "layer1/0/relu", "layer1/0/add", "layer1/1/conv1",
    "layer1/1/add", "layer2/0/conv1", "layer2/0/downsample/0", "layer2/0/add", "layer2/1/conv1", "layer2/1/add",
    "layer2/10/conv1", "avgpool", "fc"};
#define N_RESNET ((int)(sizeof resnet_names / sizeof *resnet_names))

static void shards_str(const ir_graph *g, char *buf) {
  for (int i = 0; i < g->n_nodes; i++) buf[i] = (char)('0' + g->nodes[i].shard);
  buf[g->n_nodes] = 0;
}

static void test_names(void) {
  ir_graph *g = chain(resnet_names, N_RESNET);
  ir_diag d = {0};
  char s[64];
  const char *sp1[] = {"layer1/1", "layer2/0/downsample/0", "layer2/10"};
  CHECK(pass_split(g, sp1, 3, 0, &d) == 0, "split by names: %s", d.msg);
  shards_str(g, s);
  CHECK(g->n_shards == 4 && strcmp(s, "00000001112222333") == 0, "block-prefix split gives %s (n_shards %d)", s, g->n_shards);
  /* "layer2/1" must not match "layer2/10/..." first: prefix is a path component */
  const char *sp2[] = {"layer2/1"};
  memset(&d, 0, sizeof d);
  CHECK(pass_split(g, sp2, 1, 0, &d) == 0, "split layer2/1: %s", d.msg);
  shards_str(g, s);
  CHECK(strcmp(s, "00000000000011111") == 0, "layer2/1 split gives %s", s);
  const char *sp3[] = {"fc"};
  memset(&d, 0, sizeof d);
  CHECK(pass_split(g, sp3, 1, 0, &d) == 0 && g->nodes[N_RESNET - 1].shard == 1 && g->nodes[N_RESNET - 2].shard == 0,
        "split at the last layer");
  ir_graph_free(g);
}

static void test_errors(void) {
  ir_graph *g = chain(resnet_names, N_RESNET);
  ir_diag d = {0};
  const char *unknown[] = {"layer2/0/downsampel"};
  CHECK(pass_split(g, unknown, 1, 0, &d) != 0 && strstr(d.msg, "did you mean 'layer2/0/downsample'"),
        "unknown name suggestion: %s", d.msg);
  memset(&d, 0, sizeof d);
  const char *unknown2[] = {"layer2/1/conv"};
  CHECK(pass_split(g, unknown2, 1, 0, &d) != 0 && strstr(d.msg, "'layer2/1/conv'") &&
            strstr(d.msg, "did you mean 'layer2/1/conv1'"),
        "unknown block suggestion: %s", d.msg);
  memset(&d, 0, sizeof d);
  const char *order[] = {"layer2/0", "layer1/1"};
  CHECK(pass_split(g, order, 2, 0, &d) != 0 && strstr(d.msg, "increasing"), "order error: %s", d.msg);
  memset(&d, 0, sizeof d);
  const char *dup[] = {"layer1/1", "layer1/1/conv1"};
  CHECK(pass_split(g, dup, 2, 0, &d) != 0, "two splits at one layer must fail");
  memset(&d, 0, sizeof d);
  const char *first[] = {"conv1"};
  CHECK(pass_split(g, first, 1, 0, &d) != 0 && strstr(d.msg, "empty"), "split at the first layer: %s", d.msg);
  memset(&d, 0, sizeof d);
  CHECK(pass_split(g, NULL, 0, N_RESNET + 1, &d) != 0, "more shards than layers must fail");
  memset(&d, 0, sizeof d);
  const char *two[] = {"layer1/1"};
  CHECK(pass_split(g, two, 1, 3, &d) != 0 && strstr(d.msg, "contradicts"), "--shards vs splits: %s", d.msg);
  ir_graph_free(g);
  CHECK(pass_edit_distance("kitten", "sitting") == 3 && pass_edit_distance("", "abc") == 3 &&
            pass_edit_distance("layer1", "layer1") == 0,
        "edit distance");
}

/* Largest stage cost of the split in g. */
static double max_stage(const ir_graph *g) {
  double st[16] = {0}, m = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    ir_cost c;
    ir_node_cost(g, &g->nodes[i], &c);
    st[g->nodes[i].shard] += c.flops + 1.0;
  }
  for (int s = 0; s < g->n_shards; s++) m = st[s] > m ? st[s] : m;
  return m;
}

/* Best possible largest stage over all contiguous splits (brute force over cut sets). */
static double brute_best(const double *c, int n, int k, int from) {
  if (k == 1) {
    double s = 0;
    for (int i = from; i < n; i++) s += c[i];
    return s;
  }
  double best = 1e300, s = 0;
  for (int cut = from + 1; cut <= n - (k - 1); cut++) {
    s += c[cut - 1];
    double rest = brute_best(c, n, k - 1, cut), m = s > rest ? s : rest;
    if (m < best) best = m;
  }
  return best;
}

/* Chains of different-sized convs: balanced split is contiguous, non-empty, optimal. */
static void test_balanced(void) {
  srand(7);
  for (int trial = 0; trial < 20; trial++) {
    ir_graph *g = ir_graph_new("bal", 1);
    int v = ir_add_input(g, "x", IR_F32, (ir_shape){4, {1, 4, 8, 8}});
    int n = 4 + rand() % 9;
    for (int i = 0; i < n; i++) {
      char name[32], wn[40];
      snprintf(name, sizeof name, "b%d/conv", i);
      snprintf(wn, sizeof wn, "b%d/weight", i);
      int k = 1 + 2 * (rand() % 3);
      int w = ir_add_param(g, wn, (ir_shape){4, {4, 4, k, k}}, 1);
      ir_attr a = {.conv2d = {{k, k}, {1, 1}, {k / 2, k / 2, k / 2, k / 2}, {1, 1}, 1}};
      ir_diag d = {0};
      v = ir_add_node(g, IR_OP_conv2d, name, (ir_loc){0}, (int[]){v, w}, 2, &a, &d);
      if (v < 0) abort();
    }
    int shards = 2 + rand() % 3;
    ir_diag d = {0};
    CHECK(pass_split(g, NULL, 0, shards, &d) == 0, "balanced split: %s", d.msg);
    int ok = g->n_shards == shards && g->nodes[0].shard == 0 && g->nodes[n - 1].shard == shards - 1;
    for (int i = 1; i < n; i++) ok &= g->nodes[i].shard == g->nodes[i - 1].shard || g->nodes[i].shard == g->nodes[i - 1].shard + 1;
    CHECK(ok, "trial %d: split into %d shards is not contiguous and non-empty", trial, shards);
    double c[16];
    for (int i = 0; i < n; i++) {
      ir_cost cc;
      ir_node_cost(g, &g->nodes[i], &cc);
      c[i] = cc.flops + 1.0;
    }
    double best = brute_best(c, n, shards, 0), got = max_stage(g);
    CHECK(got <= best * (1 + 1e-12), "trial %d: largest stage %.0f, optimum %.0f", trial, got, best);
    ir_graph_free(g);
  }
}

static void test_plan_memory(void) {
  srand(11);
  for (int trial = 0; trial < 50; trial++) {
    pass_usage u[40];
    int n = 1 + rand() % 40;
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      int a = rand() % 30, len = rand() % 6;
      u[i] = (pass_usage){a, a + len, 1 + rand() % 5000, (int64_t)1 << (rand() % 7), -1};
      sum += u[i].bytes;
    }
    int64_t total = pass_plan_memory(u, n);
    CHECK(total % 64 == 0, "arena size must be a multiple of 64");
    for (int i = 0; i < n; i++) {
      CHECK(u[i].offset >= 0 && u[i].offset % u[i].align == 0 && u[i].offset + u[i].bytes <= total,
            "record %d misplaced", i);
      for (int j = 0; j < i; j++) {
        int live = u[i].first_step <= u[j].last_step && u[j].first_step <= u[i].last_step;
        int mem = u[i].offset < u[j].offset + u[j].bytes && u[j].offset < u[i].offset + u[i].bytes;
        CHECK(!(live && mem), "trial %d: records %d and %d overlap in time and memory", trial, i, j);
      }
    }
    CHECK(total <= sum + 64 * n + 64, "arena larger than all buffers side by side");
  }
  /* a chain a->b->c: a and c can share memory */
  pass_usage chain3[3] = {{0, 1, 1000, 64, 0}, {1, 2, 1000, 64, 0}, {2, 3, 1000, 64, 0}};
  CHECK(pass_plan_memory(chain3, 3) == 2048 && chain3[0].offset == chain3[2].offset, "chain reuse");
}

int main(void) {
  test_names();
  test_errors();
  test_balanced();
  test_plan_memory();
  return check_done("test_split", g_failures);
}
