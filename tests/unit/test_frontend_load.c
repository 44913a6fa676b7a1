/* test_frontend_load.c — the options API (defaults, lookup, typed setting, "not implemented
 * yet", JSON) and fe_load's contract: compile: fills options not set on the command line,
 * options are restored on failure, `weights:` is relative to the model file, training adds a
 * label and a loss and defaults to batch 64 with momentum SGD, and the zoo's ResNet-50 lowers
 * to the expected totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/fe.h"
#include "frontend/weights.h"

#include "check.h"

static char g_dir[256];

static const char *write_file(const char *name, const char *text) {
  static char path[8][512];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 512, "%s/%s", g_dir, name);
  FILE *f = fopen(p, "w");
  if (!f) return NULL;
  fputs(text, f);
  fclose(f);
  return p;
}

static int bs_k(void) { return fe_option_find("batch-size"); }

static void test_options(void) {
  fe_options o;
  ir_diag d = {0};
  fe_options_init(&o);
  CHECK(o.batch_size == 1 && o.mode == FE_MODE_INFERENCE && o.precision == FE_PRECISION_32_32 && !o.weights[0] &&
            o.pipeline_splits.n == 0 && !strcmp(o.available_memory_proportion, "0.6"),
        "defaults");
  /* enum options: typed values (options.def OPT_VALUE rows), their texts and the value list */
  char vals[128];
  int rk = fe_option_find("recompute");
  CHECK(!strcmp(fe_opt_values(rk, vals, sizeof vals), "none|auto|pipeline|all") && !fe_opt_values(bs_k(), vals, sizeof vals)[0],
        "values: %s", vals);
  CHECK(fe_option_set(&o, rk, "pipeline", &d) == 0 && o.recompute == FE_RECOMPUTE_PIPELINE &&
            !strcmp(fe_optval_text(o.recompute), "pipeline"), "enum set");
  CHECK(fe_option_set(&o, rk, "al", &d) == -1 && strstr(d.msg, "one of none|auto|pipeline|all") && strstr(d.msg, "'all'") &&
            o.recompute == FE_RECOMPUTE_PIPELINE, "enum error: %s", d.msg);
  d = (ir_diag){0};
  int bs = fe_option_find("batch-size");
  CHECK(bs >= 0 && bs == fe_option_find("batch_size") && fe_option_find("batchsize") < 0, "lookup");
  CHECK(fe_option_set(&o, bs, "0", &d) == -1 && strstr(d.msg, "--batch-size must be an integer in 1..65536"), "range: %s", d.msg);
  d = (ir_diag){0};
  CHECK(fe_option_set(&o, bs, "4x", &d) == -1 && strstr(d.msg, "integer"), "int syntax: %s", d.msg);
  d = (ir_diag){0};
  CHECK(fe_option_set(&o, fe_option_find("mode"), "train", &d) == -1 && strstr(d.msg, "did you mean 'training'"),
        "enum: %s", d.msg);
  d = (ir_diag){0};
  int unimpl = -1; /* any option still declared implemented = 0 in options.def */
  for (int k = 0; k < FE_OPT_COUNT && unimpl < 0; k++)
    if (!fe_opt_table[k].implemented) unimpl = k;
  if (unimpl >= 0) {
    char want[128];
    snprintf(want, sizeof want, "--%s: not implemented yet", fe_opt_table[unimpl].long_name);
    CHECK(fe_option_set(&o, unimpl, fe_opt_table[unimpl].type == OPT_FLAG ? NULL : "1", &d) == -1 && !strcmp(d.msg, want),
          "unimplemented: %s", d.msg);
  }
  d = (ir_diag){0};
  CHECK(fe_option_set(&o, bs, "4", &d) == 0 && o.batch_size == 4 && o.set[bs], "set batch");
  int ps = fe_option_find("pipeline-splits");
  CHECK(fe_option_set(&o, ps, "layer2/0", &d) == 0 && fe_option_set(&o, ps, "layer3/0", &d) == 0 &&
            o.pipeline_splits.n == 2 && !strcmp(o.pipeline_splits.v[1], "layer3/0"),
        "list");
  char *json = fe_options_json(&o);
  CHECK(json && strstr(json, "\"batch_size\": 4") && strstr(json, "\"pipeline_splits\": [\"layer2/0\", \"layer3/0\"]") &&
            strstr(json, "\"mode\": \"inference\"") && strstr(json, "\"enable_half_partials\": false"),
        "json: %s", json ? json : "(null)");
  free(json);
}

static const char *const k_model =
    "name: tiny\n"
    "input: {shape: [2, 4, 4], classes: 3}\n"
    "compile: {batch_size: 5, seed: 11, pipeline_splits: [fc]}\n"
    "layers:\n"
    "  - {name: conv, op: conv, filters: 2, kernel: 3, padding: 1}\n"
    "  - {name: bn, op: batchnorm}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: dense, units: 3}\n";

/* The model at path loaded on fresh options o, with option name = value unless name is NULL. */
static ir_graph *load_with(const char *path, const char *name, const char *value, fe_options *o, ir_diag *d) {
  fe_options_init(o);
  if (name) fe_option_set(o, fe_option_find(name), value, d);
  return fe_load(path, o, d);
}

static void test_compile_section(void) {
  const char *path = write_file("tiny.yml", k_model);
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = load_with(path, "seed", "3", &o, &d);
  CHECK(g && !d.failed, "load tiny: %s", d.msg);
  if (!g) return;
  CHECK(g->batch == 5 && o.batch_size == 5 && o.set[fe_option_find("batch_size")], "batch from compile:");
  CHECK(o.seed == 3, "command-line seed kept (got %lld)", (long long)o.seed);
  CHECK(o.pipeline_splits.n == 1 && !strcmp(o.pipeline_splits.v[0], "fc"), "splits from compile:");
  CHECK(g->n_outputs == 1 && g->label < 0, "inference: one output, no label");
  ir_graph_free(g);
}

static void test_failure_restores_options(void) {
  const char *path = write_file("bad.yml",
                                "name: bad\ninput: {shape: [2, 4, 4]}\ncompile: {batch_size: 7}\n"
                                "layers:\n  - {name: c, op: conv, filters: 2, kernel: 0}\n");
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = load_with(path, NULL, NULL, &o, &d);
  CHECK(!g && d.failed && d.loc.line == 5 && !strcmp(d.layer, "c") && strstr(d.msg, "'kernel' must be >= 1"),
        "located error: %d:%d %s %s", d.loc.line, d.loc.col, d.layer, d.msg);
  CHECK(o.batch_size == 1 && !o.set[fe_option_find("batch_size")], "options restored after failure");
}

static void test_training(void) {
  const char *path = write_file("tiny_train.yml", k_model);
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = load_with(path, "mode", "training", &o, &d);
  CHECK(g, "load training: %s", d.msg);
  if (!g) return;
  int loss = ir_find_node(g, "loss"), bn = ir_find_node(g, "bn");
  CHECK(g->label >= 0 && loss >= 0 && g->nodes[loss].op == IR_OP_softmax_xent, "label and loss");
  CHECK(g->n_outputs == 2 && g->outputs[1] == g->nodes[loss].out, "loss is the last output");
  CHECK(bn >= 0 && g->nodes[bn].attr.batchnorm.training == 1, "batchnorm in training mode");
  ir_graph_free(g);
}

/* Training defaults (issue 23): the standard PyTorch recipe of ../shared/anchors/fmnist_torch.py
 * (SGD momentum 0.9, batch 64; cnnrun train's lr 0.05) without flags; a batch given on the
 * command line or in compile: wins; inference keeps batch 1. */
static void test_training_defaults(void) {
  const char *path = write_file("tiny_nobatch.yml",
                                "name: tiny\n"
                                "input: {shape: [2, 4, 4], classes: 3}\n"
                                "layers:\n"
                                "  - {name: flat, op: flatten}\n"
                                "  - {name: fc, op: dense, units: 3}\n");
  const char *path_c = write_file("tiny_compile_train.yml",
                                  "name: tiny\n"
                                  "input: {shape: [2, 4, 4], classes: 3}\n"
                                  "compile: {mode: training}\n"
                                  "layers:\n"
                                  "  - {name: flat, op: flatten}\n"
                                  "  - {name: fc, op: dense, units: 3}\n");
  fe_options o;
  ir_diag d = {0};
  fe_options_init(&o);
  CHECK(o.optimizer == FE_OPTIMIZER_MOMENTUM && o.momentum == 0.9, "default optimizer: momentum 0.9");
  ir_graph *g = load_with(path, "mode", "training", &o, &d);
  CHECK(g && g->batch == FE_TRAIN_BATCH_DEFAULT && FE_TRAIN_BATCH_DEFAULT == 64 && o.batch_size == 64 &&
            !o.set[bs_k()],
        "training without --batch-size: batch 64 (got %d: %s)", g ? g->batch : -1, d.msg);
  ir_graph_free(g);
  g = load_with(path_c, NULL, NULL, &o, &d);
  CHECK(g && g->batch == 64 && o.mode == FE_MODE_TRAINING, "compile: mode training: batch 64 (got %d: %s)",
        g ? g->batch : -1, d.msg);
  ir_graph_free(g);
  fe_options_init(&o);
  fe_option_set(&o, fe_option_find("mode"), "training", &d);
  fe_option_set(&o, bs_k(), "1", &d);
  g = fe_load(path, &o, &d);
  CHECK(g && g->batch == 1, "training with --batch-size 1 keeps 1 (got %d: %s)", g ? g->batch : -1, d.msg);
  ir_graph_free(g);
  g = load_with(write_file("tiny.yml", k_model), "mode", "training", &o, &d);
  CHECK(g && g->batch == 5, "training with compile: batch_size 5 keeps 5 (got %d: %s)", g ? g->batch : -1, d.msg);
  ir_graph_free(g);
  g = load_with(path, NULL, NULL, &o, &d);
  CHECK(g && g->batch == 1 && o.batch_size == 1, "inference default batch 1 (got %d: %s)", g ? g->batch : -1, d.msg);
  ir_graph_free(g);
}

/* weights: in the model file is relative to the model's directory, not the cwd. */
static void test_weights_relative(void) {
  const char *path = write_file("w_src.yml", k_model);
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = load_with(path, NULL, NULL, &o, &d);
  CHECK(g, "load: %s", d.msg);
  if (!g) return;
  int w = ir_find_value(g, "fc/weight");
  char wpath[512];
  snprintf(wpath, sizeof wpath, "%s/tiny.safetensors", g_dir);
  CHECK(w >= 0 && fe_save_safetensors(g, wpath, &d) == 0, "save: %s", d.msg);
  float first = w >= 0 ? g->values[w].data[0] : 0;
  ir_graph_free(g);

  char text[1024];
  snprintf(text, sizeof text, "%sweights: tiny.safetensors\n", k_model);
  const char *path2 = write_file("w_dst.yml", text);
  char cwd[512];
  CHECK(getcwd(cwd, sizeof cwd) && chdir("/") == 0, "chdir");
  fe_options o2;
  ir_diag d2 = {0};
  fe_options_init(&o2);
  fe_option_set(&o2, fe_option_find("seed"), "99", &d2); /* different init: loading must win */
  ir_graph *g2 = fe_load(path2, &o2, &d2);
  CHECK(chdir(cwd) == 0, "chdir back");
  CHECK(g2, "load with weights: %s", d2.msg);
  if (!g2) return;
  int w2 = ir_find_value(g2, "fc/weight");
  CHECK(w2 >= 0 && g2->values[w2].data[0] == first, "weights loaded from the model's directory");
  ir_graph_free(g2);
}

static void test_resnet50(void) {
  fe_options o;
  ir_diag d = {0};
  fe_options_init(&o);
  ir_graph *g = fe_load(CNNC_TEST_SRC "/models/resnet50.yml", &o, &d);
  CHECK(g, "resnet50: %s", d.msg);
  if (!g) return;
  CHECK(ir_param_count(g, 1) == 25557032, "resnet50 params %lld", (long long)ir_param_count(g, 1));
  CHECK(ir_find_node(g, "layer2/0/downsample/0") >= 0 && ir_find_node(g, "layer2/1/downsample/0") < 0,
        "downsample only in the first bottleneck of a stage");
  CHECK(g->n_outputs == 1 && !strcmp(g->values[g->outputs[0]].name, "fc"), "output fc");
  ir_graph_free(g);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/cnnc_fe_test_XXXXXX");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_options();
  test_compile_section();
  test_failure_restores_options();
  test_training();
  test_training_defaults();
  test_weights_relative();
  test_resnet50();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
  return check_done("test_frontend_load", g_failures);
}
