/* cnnrun.c — runs a model .so compiled by cnnc through libcnnrt (runtime/cnnrt.h):
 *   cnnrun MODEL.so info [--json]                  the descriptor
 *   cnnrun MODEL.so benchmark [--batches N] ...    img/s and latency on synthetic input (training
 *                                                  models: steady-state training steps)
 *   cnnrun MODEL.so infer --input FILE ...         raw or idx(.gz) tensors in, logits out
 *   cnnrun MODEL.so train --dataset D ...          train a --mode training model on a dataset
 *   cnnrun MODEL.so validate --checkpoint F|DIR    accuracy of checkpoints on the test split
 * Exit status: 0 success, 1 error (model, file, runtime), 2 usage. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnnrun.h"
#include "common/cm.h"

#ifdef CNNRUN_HAVE_ZLIB
#include <zlib.h>
#endif

/* ---- command line ----------------------------------------------------------------------- */
typedef struct optdef {
  const char *name, *arg, *help;
} optdef;

/* Entries that read the same in several commands' tables. */
#define OPT_THREADS {"--threads", "T[,T...]", "threads per shard"}
#define OPT_PIN {"--pin", NULL, "pin each shard's threads to its own cores"}
#define OPT_REPLICAS                                                                                                  \
  {"--replicas", "R", "inference models: R model instances in this process, each on its own group of cores (default 1)"}
#define OPT_TRACE {"--trace", "FILE", "write a Chrome/Perfetto trace of the runs to FILE (docs/reports.md)"}
#define OPT_DATASET {"--dataset", "NAME", "fashion-mnist, mnist, cifar10, cifar100, folder, tfrecord or synthetic (default fashion-mnist)"}
#define OPT_DATA_DIR {"--data-dir", "DIR", "where the dataset files are (default /usr/share/datasets/<dataset>); folder: DIR/train/CLASS/*.jpg|png, DIR/val/CLASS/...; tfrecord: DIR/train-NNNNN-of-MMMMM, DIR/validation-..."}
#define OPT_FOLDER_OPTS                                                                                                      \
  {"--augment", "imagenet|none", "folder, tfrecord: imagenet (default: random-resized crop + flip; val: resize + centre crop) or none (resize)"}, \
      {"--loader-threads", "N", "folder, tfrecord: image decoder threads, 0..256 (default: half the cores, at least 1; 0: decode in the step's thread)"}, \
      {"--bad-images", "stop|skip", "folder, tfrecord: an image that fails to decode stops the run (default) or is skipped, counted and reported"}, \
      {"--label-base", "K", "tfrecord: subtracted from the stored labels (1 for TensorFlow's ImageNet shards, labels 1..1000; default 0)"}
#define OPT_ALLOW_NONFINITE {"--allow-nonfinite", NULL, "load checkpoints with NaN/Inf values or negative running variances (refused by default)"}

static const optdef info_opts[] = {{"--json", NULL, "print the descriptor as JSON"}, {NULL, NULL, NULL}};
static const optdef bench_opts[] = {
    {"--batches", "N", "micro-batches per call (device iterations; default 8); training: weight updates per call (default 1)"},
    {"--runs", "R", "timed calls, at least (default 5)"},
    {"--seconds", "S", "time calls until at least S seconds have passed too (default 0)"},
    {"--warmup", "W", "untimed calls first (default 1; training: 2, as torch_bench.py)"},
    {"--lr", "LR", "training models only: learning rate of the steps (default 0.01, as torch_bench.py)"},
    {"--threads", "T[,T...]", "threads per shard (one value for all, or one per shard)"},
    OPT_PIN,
    {"--json", NULL, "print the results as JSON"},
    OPT_REPLICAS,
    OPT_TRACE,
    {"--profile", NULL, "time every op of the timed runs: per layer ms, GFLOP/s, % of peak, kernel (inference models only)"},
    {"--peak", "GFLOPS", "per-core fp32 peak for --profile's % columns (default: measured, FMA of the widest vectors: AVX-512 or AVX2)"},
    {NULL, NULL, NULL}};
static const optdef infer_opts[] = {
    {"--input", "FILE", "samples: raw (the input dtype: u8 or f32; ONNX i8, i32) or idx (u8 or f32 inputs; MNIST format, .gz too)"},
    {"--output", "FILE", "write the outputs raw, [samples, ...] per output in order, each in its dtype (f32; ONNX integers)"},
    {"--top", "K", "print the K best classes of each sample"},
    {"--labels", "FILE", "idx1 (or raw u8) labels: print the top-1 accuracy"},
    {"--format", "auto|raw|idx", "input file format (default auto)"},
    {"--batches", "N", "micro-batches per call (default 64)"},
    OPT_THREADS,
    OPT_PIN,
    OPT_REPLICAS,
    OPT_TRACE,
    {NULL, NULL, NULL}};

static const optdef train_opts[] = {
    OPT_DATASET,
    OPT_DATA_DIR,
    OPT_FOLDER_OPTS,
    {"--epochs", "E", "passes over the training split (default 1)"},
    {"--logs-per-epoch", "X", "logs (and checkpoints) per epoch: 4, 0.5 or 1/2 (default 1)"},
    {"--lr", "LR", "base learning rate (default 0.05)"},
    {"--lr-per-256", "LR", "instead of --lr: the base lr for 256 samples per update, scaled to the global batch (lr = LR x batch x micro-batches x replicas / 256)"},
    {"--lr-schedule", "KIND", "constant, step, cosine or exponential (default constant)"},
    {"--lr-decay-epochs", "E1,E2", "step schedule: epochs where the lr is multiplied by the factor"},
    {"--lr-factor", "F", "step: factor per decay (default 0.1); exponential: per epoch (default 0.9)"},
    {"--warmup-epochs", "W", "linear warmup from 0 over W epochs (default 0)"},
    {"--checkpoint-dir", "DIR", "save a checkpoint at every log (DIR/ckpt-step-NNNNNNNN.safetensors)"},
    {"--weight-avg-exp", "D", "keep an exponential moving average of the weights, avg = D avg + (1-D) w per update: "
                              "validated at the end, checkpointed as ckpt-step-N.ema.safetensors"},
    {"--mixup", "ALPHA", "mixup each micro-batch with lam ~ Beta(ALPHA, ALPHA), partner the batch reversed (timm's Mixup; model compiled with --mixed-labels)"},
    {"--cutmix", "ALPHA", "cutmix each micro-batch, lam ~ Beta(ALPHA, ALPHA) corrected to the box; with --mixup: one of the two per batch, 0.5 each"},
    {"--restore", "CKPT", "start from this checkpoint (weights, optimizer state, step; under mpirun rank 0 reads it)"},
    {"--comm-timeout", "S", "under mpirun: seconds a rank waits for the others before every rank stops (default 300; 0: none)"},
    {"--limit", "N", "use only the first N training samples (of a folder: N spread evenly over it)"},
    {"--seed", "S", "shuffling seed (default 1; 0 = file order)"},
    {"--validate-every", "E", "also validate on the test split every E epochs during the training (default: only at the end)"},
    {"--no-validation", NULL, "no validation at all (the test split is not opened)"},
    OPT_ALLOW_NONFINITE,
    OPT_THREADS,
    {"--json", NULL, "print logs and results as JSON lines"},
    {"--trace", "FILE", "write a Chrome/Perfetto trace of the training steps and validation to FILE (docs/reports.md)"},
    {NULL, NULL, NULL}};
static const optdef validate_opts[] = {
    {"--checkpoint", "FILE|DIR", "one checkpoint, or every *.safetensors in DIR (sorted by step)"},
    OPT_DATASET,
    OPT_DATA_DIR,
    OPT_FOLDER_OPTS,
    {"--limit", "N", "use only the first N test samples (of a folder: N spread evenly over it)"},
    OPT_ALLOW_NONFINITE,
    OPT_THREADS,
    {"--json", NULL, "print the results as JSON lines"},
    {NULL, NULL, NULL}};

/* Runtime options (cnnrt_options), accepted by every command. */
static const optdef runtime_opts[] = {
    {"--spin-us", "N", "microseconds a waiting thread spins before it sleeps, 0..10000000 (default 2000; 0: sleep at once)"},
    {"--hugepages", "MODE", "2 MB pages for the big buffers: inference (default: inference frames and scratch), "
                            "off (none: aligned_alloc) or all (training buffers too)"},
    {"--replica-mode", "MODE", "--replicas training: shared (default: replicas one after another on their shard's "
                               "threads) or parallel (each on its own share of them; not with batchnorm statistics)"},
    {NULL, NULL, NULL}};

static void usage(FILE *f) {
  fprintf(f, "usage: cnnrun MODEL.so info [--json]\n"
             "       cnnrun MODEL.so benchmark [--batches N] [--runs R] [--seconds S] [--warmup W] [--threads T] [--pin]\n"
             "                                 [--json] [--trace FILE.json] [--profile [--peak GFLOPS]] [--lr LR (training)]\n"
             "                                 [--replicas R (inference)]\n"
             "       cnnrun MODEL.so infer --input FILE [--output FILE] [--top K] [--labels FILE] [--replicas R]\n"
             "       cnnrun MODEL.so train [--dataset D] [--data-dir DIR] [--epochs E] [--logs-per-epoch X] [--lr LR | --lr-per-256 LR]\n"
             "                             [--augment imagenet|none] [--loader-threads N] [--bad-images stop|skip] [--label-base K]\n"
             "                             [--lr-schedule KIND] [--warmup-epochs W] [--checkpoint-dir DIR] [--restore CKPT]\n"
             "                             [--limit N] [--validate-every E | --no-validation] [--json] [--trace FILE.json]\n"
             "                             [--allow-nonfinite]\n"
             "       cnnrun MODEL.so validate --checkpoint FILE|DIR [--dataset D] [--data-dir DIR] [--allow-nonfinite]\n"
             "       cnnrun --help | --version\n"
             "runtime options, every command: [--spin-us N] [--hugepages inference|off|all] [--replica-mode shared|parallel]\n"
             "'cnnrun MODEL.so COMMAND --help' describes a command's options.  Inputs must be regular files;\n"
             "outputs are checked before the work starts, never overwrite an input and are written atomically.\n");
}

static void print_optdefs(const optdef *defs) {
  for (const optdef *d = defs; d->name; d++) {
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
    printf("  %-24s %s\n", left, d->help);
  }
}

static void command_help(const char *cmd, const optdef *defs) {
  printf("usage: cnnrun MODEL.so %s [options]\n", cmd);
  print_optdefs(defs);
  printf("runtime options (cnnrt_options, docs/runtime.md):\n");
  print_optdefs(runtime_opts);
  if (!strcmp(cmd, "benchmark"))
    printf("On a --mode training model, benchmark times training steps (cnnrt_train_step: forward, backward and\n"
           "the optimizer update) on one synthetic batch of images and labels fed every step, after W warm-up\n"
           "steps: img/s, ms per step, GFLOP/s of the compiled training FLOPs.  The weights change in memory only:\n"
           "nothing is written to disk.  --profile is refused there: the runtime's per-op profiler times\n"
           "inference calls only.\n");
}

static void vmessage(const char *fmt, va_list ap) {
  fprintf(stderr, "cnnrun: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
}

void die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
  usage(stderr);
  exit(EXIT_USAGE);
}

void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dist_die_prefix();
  vmessage(fmt, ap);
  va_end(ap);
  dist_abort(1); /* under mpirun: every rank ends, none waits for this one */
  exit(1);
}

/* Numbers parse as cnnc's options and model files do (cm_num_parse, common/cm.h). */
static int parse_int(const char *opt, const char *s, int lo, int hi) {
  int64_t v;
  char why[256];
  if (cm_num_parse(s, lo, hi, CM_NUM_INTEGER, NULL, &v, why, sizeof why)) die_usage("%s: %s", opt, why);
  return (int)v;
}

static void parse_threads(opts *o, const char *s) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  o->n_threads = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (o->n_threads == 64) die_usage("--threads: more than 64 values");
    o->threads[o->n_threads++] = parse_int("--threads", tok, 1, 1024);
  }
  if (o->n_threads == 0) die_usage("--threads: no value");
}

static double parse_double(const char *opt, const char *s, double lo) {
  double v;
  char why[256];
  if (cm_num_parse(s, lo, INFINITY, 0, &v, NULL, why, sizeof why)) die_usage("%s: %s", opt, why);
  return v;
}

static unsigned long long parse_seed(const char *opt, const char *s) {
  int64_t v;
  char why[256];
  if (cm_num_parse(s, 0, (double)INT64_MAX, CM_NUM_INTEGER, NULL, &v, why, sizeof why)) die_usage("%s: %s", opt, why);
  return (unsigned long long)v;
}

static int parse_choice(const char *opt, const char *v, const char *const *names, int n);

static int set_train_option(opts *o, const char *name, const char *v) {
  static const char *const augment[] = {"imagenet", "none"}; /* CNNRT_AUGMENT_* */
  static const char *const bad[] = {"stop", "skip"};
  if (!strcmp(name, "--dataset")) o->dataset = v;
  else if (!strcmp(name, "--data-dir")) o->data_dir = v;
  else if (!strcmp(name, "--epochs")) o->epochs = parse_int(name, v, 1, 1 << 20);
  else if (!strcmp(name, "--logs-per-epoch")) o->logs_per_epoch = v;
  else if (!strcmp(name, "--lr")) o->lr = parse_double(name, v, 0), o->lr_set = 1;
  else if (!strcmp(name, "--lr-per-256")) o->lr_per_256 = parse_double(name, v, 0), o->lr_per_256_set = 1;
  else if (!strcmp(name, "--lr-schedule")) o->lr_schedule = v;
  else if (!strcmp(name, "--lr-decay-epochs")) o->decay_epochs = v;
  else if (!strcmp(name, "--lr-factor")) o->lr_factor = parse_double(name, v, 0);
  else if (!strcmp(name, "--warmup-epochs")) o->warmup_epochs = parse_double(name, v, 0);
  else if (!strcmp(name, "--checkpoint-dir")) o->checkpoint_dir = v;
  else if (!strcmp(name, "--restore")) o->restore = v;
  else if (!strcmp(name, "--comm-timeout")) o->comm_timeout = parse_double(name, v, 0);
  else if (!strcmp(name, "--checkpoint")) o->checkpoint = v;
  else if (!strcmp(name, "--limit")) o->limit = parse_int(name, v, 1, INT32_MAX);
  else if (!strcmp(name, "--seed")) o->seed = parse_seed(name, v);
  else if (!strcmp(name, "--allow-nonfinite")) o->rt.allow_nonfinite = 1;
  else if (!strcmp(name, "--augment")) o->augment = parse_choice(name, v, augment, 2);
  else if (!strcmp(name, "--loader-threads")) o->loader_threads = parse_int(name, v, 0, 256);
  else if (!strcmp(name, "--bad-images")) o->skip_bad = parse_choice(name, v, bad, 2);
  else if (!strcmp(name, "--label-base")) o->label_base = parse_int(name, v, -(1 << 24), 1 << 24);
  else if (!strcmp(name, "--weight-avg-exp")) {
    o->ema_decay = parse_double(name, v, 0);
    if (!(o->ema_decay > 0 && o->ema_decay < 1)) die_usage("--weight-avg-exp: %s is not in (0, 1) (e.g. 0.97)", v);
  }
  else if (!strcmp(name, "--mixup") || !strcmp(name, "--cutmix")) {
    double a = parse_double(name, v, 0);
    if (!(a <= 1e6)) die_usage("%s: %s is over 1e6", name, v);
    *(name[2] == 'm' ? &o->mixup : &o->cutmix) = a;
  }
  else if (!strcmp(name, "--validate-every")) o->validate_every = parse_int(name, v, 1, 1 << 20);
  else if (!strcmp(name, "--no-validation")) o->no_validation = 1;
  else return 0;
  return 1;
}

/* The value of v among names[n] (the enum's values in order); dies naming them otherwise. */
static int parse_choice(const char *opt, const char *v, const char *const *names, int n) {
  for (int k = 0; k < n; k++)
    if (!strcmp(v, names[k])) return k;
  die_usage("%s: '%s' is not %s%s%s%s%s", opt, v, names[0], n > 2 ? ", " : " or ", names[1], n > 2 ? " or " : "",
            n > 2 ? names[2] : "");
}

static int set_runtime_option(opts *o, const char *name, const char *v) {
  static const char *const huge[] = {"inference", "off", "all"};       /* CNNRT_HUGEPAGES_* */
  static const char *const replica[] = {"shared", "parallel"};         /* CNNRT_REPLICA_* */
  if (!strcmp(name, "--spin-us")) o->rt.spin_us = parse_int(name, v, 0, CNNRT_SPIN_US_MAX);
  else if (!strcmp(name, "--hugepages")) o->rt.hugepages = (cnnrt_hugepages)parse_choice(name, v, huge, 3);
  else if (!strcmp(name, "--replica-mode")) o->rt.replica_mode = (cnnrt_replica_mode)parse_choice(name, v, replica, 2);
  else return 0;
  return 1;
}

static void set_option(opts *o, const char *name, const char *v) {
  if (set_train_option(o, name, v) || set_runtime_option(o, name, v)) return;
  if (!strcmp(name, "--json")) o->json = 1;
  else if (!strcmp(name, "--pin")) o->pin = 1;
  else if (!strcmp(name, "--batches")) o->batches = parse_int(name, v, 1, 1 << 20), o->batches_set = 1;
  else if (!strcmp(name, "--runs")) o->runs = parse_int(name, v, 1, 1 << 20);
  else if (!strcmp(name, "--warmup")) o->warmup = parse_int(name, v, 0, 1 << 20), o->warmup_set = 1;
  else if (!strcmp(name, "--seconds")) o->seconds = parse_double(name, v, 0);
  else if (!strcmp(name, "--top")) o->top = parse_int(name, v, 1, 1 << 20);
  else if (!strcmp(name, "--replicas")) o->replicas = parse_int(name, v, 1, 1024);
  else if (!strcmp(name, "--threads")) parse_threads(o, v);
  else if (!strcmp(name, "--input")) o->input = v;
  else if (!strcmp(name, "--output")) o->output = v;
  else if (!strcmp(name, "--labels")) o->labels = v;
  else if (!strcmp(name, "--trace")) o->trace = v;
  else if (!strcmp(name, "--profile")) o->profile = 1;
  else if (!strcmp(name, "--peak")) o->peak = parse_double(name, v, 1e-3);
  else if (!strcmp(name, "--format")) {
    if (strcmp(v, "auto") && strcmp(v, "raw") && strcmp(v, "idx")) die_usage("--format: '%s' is not auto, raw or idx", v);
    o->format = v;
  }
}

/* Options of one command: "--name VALUE", "--name=VALUE" or a flag; --help prints them. */
static void parse_command(opts *o, int argc, char **argv, const optdef *defs) {
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      command_help(o->cmd, defs);
      exit(0);
    }
    const char *eq = strchr(argv[i], '=');
    size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
    const optdef *d = defs;
    while (d->name && (strlen(d->name) != len || strncmp(d->name, argv[i], len) != 0)) d++;
    if (!d->name)
      for (d = runtime_opts; d->name && (strlen(d->name) != len || strncmp(d->name, argv[i], len) != 0);) d++;
    if (!d->name) die_usage("%s: unknown option '%s'", o->cmd, argv[i]);
    const char *v = NULL;
    if (d->arg && eq) v = eq + 1;
    else if (d->arg && i + 1 < argc) v = argv[++i];
    else if (d->arg) die_usage("%s: %s needs a value (%s)", o->cmd, d->name, d->arg);
    else if (eq) die_usage("%s: %s takes no value", o->cmd, d->name);
    set_option(o, d->name, v);
  }
}

static void parse_args(opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  cnnrt_options_init(&o->rt);
  o->runs = 5;
  o->warmup = 1;
  o->batches = 8;
  o->format = "auto";
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    exit(0);
  }
  if (argc >= 2 && !strcmp(argv[1], "--version")) {
    printf("cnnrun, libcnnrt %s\n", cnnrt_version());
    exit(0);
  }
  if (argc < 3) die_usage(argc < 2 ? "no model given" : "no command given");
  o->model = argv[1];
  o->cmd = argv[2];
  const optdef *defs = !strcmp(o->cmd, "info")        ? info_opts
                       : !strcmp(o->cmd, "benchmark") ? bench_opts
                       : !strcmp(o->cmd, "infer")     ? infer_opts
                       : !strcmp(o->cmd, "train")     ? train_opts
                       : !strcmp(o->cmd, "validate")  ? validate_opts
                                                      : NULL;
  if (!strcmp(o->cmd, "--help")) {
    usage(stdout);
    exit(0);
  }
  if (!defs) die_usage("unknown command '%s' (info, benchmark, infer, train, validate)", o->cmd);
  o->dataset = "fashion-mnist";
  o->loader_threads = -1;
  o->epochs = 1;
  o->logs_per_epoch = "1";
  o->lr = 0.05;
  o->lr_factor = -1;
  o->lr_schedule = "constant";
  o->seed = 1, o->comm_timeout = 300;
  parse_command(o, argc - 3, argv + 3, defs);
  if (!strcmp(o->cmd, "infer") && !o->input) die_usage("infer: --input FILE is required");
  if (!strcmp(o->cmd, "infer") && !o->output && !o->top && !o->labels)
    die_usage("infer: give --output FILE, --top K or --labels FILE");
  if (!strcmp(o->cmd, "infer") && !o->batches_set) o->batches = 64;
  if (!strcmp(o->cmd, "benchmark") && o->peak > 0 && !o->profile) die_usage("benchmark: --peak is for --profile");
  if (o->replicas > 1 && (o->trace || o->profile)) die_usage("%s: --replicas runs several instances: no --trace or --profile", o->cmd);
  if (!strcmp(o->cmd, "validate") && !o->checkpoint) die_usage("validate: --checkpoint FILE|DIR is required");
}

/* ---- model ------------------------------------------------------------------------------ */
/* The models this process opened, so that one still open when die() exits is reachable from a
 * global rather than lost with a dead stack slot (a leak checker would report it). */
static cnnrt_model *g_opened[64];
static int g_n_opened;

cnnrt_model *open_model(const opts *o) {
  cnnrt_options ro = o->rt;
  ro.pin = o->pin;
  cnnrt_model *m = NULL;
  if (cnnrt_open(o->model, &ro, &m) != CNNRT_OK) die("%s", cnnrt_last_error());
  g_opened[g_n_opened++ % 64] = m;
  int ns = cnnrt_num_shards(m);
  if (o->n_threads > 1 && o->n_threads != ns)
    die("--threads has %d values, the model has %d shards", o->n_threads, ns);
  for (int s = 0; s < ns && o->n_threads; s++)
    if (cnnrt_set_threads(m, s, o->threads[o->n_threads == 1 ? 0 : s]) != CNNRT_OK) die("%s", cnnrt_last_error());
  if (o->trace && cnnrt_trace_begin(m, 0) != CNNRT_OK) die("%s", cnnrt_last_error());
  return m;
}

void close_model(const opts *o, cnnrt_model *m) {
  if (o->trace) {
    if (cnnrt_trace_write(m, o->trace) != CNNRT_OK) die("%s", cnnrt_last_error());
    fprintf(stderr, "cnnrun: trace written to %s\n", o->trace);
  }
  cnnrt_close(m);
}

const char *dtype_name(cnnrt_dtype t) {
  static const char *const names[] = {"f32", "bf16", "f16", "u8", "i32", "i8", "i64"};
  return (unsigned)t < 7 ? names[t] : "?";
}

static size_t dtype_size(cnnrt_dtype t) {
  return t == CNNRT_U8 || t == CNNRT_I8 ? 1 : t == CNNRT_BF16 || t == CNNRT_F16 ? 2 : t == CNNRT_I64 ? 8 : 4;
}

static void print_tensor(const char *what, const cnnrt_tensor_info *t) {
  printf("%-12s %s  %s [", what, t->name, dtype_name(t->dtype));
  for (int k = 0; k < t->rank; k++) printf("%s%lld", k ? "," : "", (long long)t->dims[k]);
  printf("]  %zu bytes\n", t->bytes);
}

static void print_train_plan(cnnrt_model *m); /* cnnrun_train.inc */

static int cmd_info(const opts *o) {
  cnnrt_model *m = open_model(o);
  if (o->json) {
    const char *js = cnnrt_describe_json(m);
    if (!js) die("%s", cnnrt_last_error());
    printf("%s\n", js);
    cnnrt_close(m);
    return 0;
  }
  cnnrt_tensor_info t;
  printf("%-12s %s (compiled by %s)\n", "model", cnnrt_model_name(m), cnnrt_compiler_version(m));
  printf("%-12s %s\n", "runtime", cnnrt_version());
  printf("%-12s %d\n", "batch size", cnnrt_batch_size(m));
  if (cnnrt_input_info(m, &t) == CNNRT_OK) print_tensor("input", &t);
  for (int k = 0; k < cnnrt_num_outputs(m); k++)
    if (cnnrt_output_info(m, k, &t) == CNNRT_OK) print_tensor(k ? "output" : "outputs", &t);
  printf("%-12s %.6g GFLOP per micro-batch\n", "compute", cnnrt_model_flops(m) / 1e9);
  printf("%-12s %d\n", "shards", cnnrt_num_shards(m));
  for (int s = 0; s < cnnrt_num_shards(m); s++) {
    cnnrt_shard_summary sh;
    if (cnnrt_shard_info(m, s, &sh) != CNNRT_OK) continue;
    printf("  shard %-3d %s .. %s: %d ops, %.6g GFLOP, scratch %zu bytes, %d thread%s\n", s, sh.first_layer,
           sh.last_layer, sh.n_ops, sh.flops / 1e9, sh.scratch_bytes, sh.threads, sh.threads == 1 ? "" : "s");
  }
  print_train_plan(m); /* cnnrun_train.inc */
  printf("%-12s %s\n", "options", cnnrt_options_json(m));
  cnnrt_close(m);
  return 0;
}

/* ---- files ------------------------------------------------------------------------------ */
typedef struct blob {
  unsigned char *p;
  size_t n;
} blob;

/* Input files: samples or labels, at most this many bytes once decompressed. */
#define MAX_INPUT_BYTES ((size_t)1 << 32)

static size_t idx_elem_size(int type);

/* The bytes an idx file whose first h bytes (h >= 4) are at p needs in all, or 0 while its
 * header is incomplete or not idx; SIZE_MAX when its dimensions promise too much. */
static size_t idx_total(const unsigned char *p, size_t h) {
  if (p[0] || p[1] || !idx_elem_size(p[2]) || p[3] < 1 || p[3] > 4 || h < 4 + 4 * (size_t)p[3]) return 0;
  size_t total = idx_elem_size(p[2]);
  for (int k = 0; k < p[3]; k++) {
    const unsigned char *d = p + 4 + 4 * k;
    size_t dim = (size_t)d[0] << 24 | (size_t)d[1] << 16 | (size_t)d[2] << 8 | d[3];
    if (dim && total > MAX_INPUT_BYTES / dim) return SIZE_MAX;
    total *= dim;
  }
  return total + 4 + 4 * (size_t)p[3];
}

/* The whole file, gunzipped if it is gzip (with zlib): a regular file (never a FIFO or a device
 * such as /dev/zero: opened without blocking and refused), at most MAX_INPUT_BYTES.  A
 * compressed idx file is read only as far as its header promises (a gzip bomb stops there);
 * with idx_bound 0 (--format raw) the bound is MAX_INPUT_BYTES. */
static blob read_file(const char *path, int idx_bound) {
  blob b = {NULL, 0};
  char why[256];
  uint64_t size;
  int fd = cm_open_regular(path, &size, why, sizeof why);
  if (fd < 0) die("%s: %s", path, why);
  unsigned char magic[2] = {0, 0};
  int gz = pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gz && size > MAX_INPUT_BYTES) die("%s: %llu bytes, more than cnnrun reads (%zu)", path, (unsigned long long)size, MAX_INPUT_BYTES);
#ifdef CNNRUN_HAVE_ZLIB
  gzFile f = gzdopen(fd, "rb");
  if (!f) die("%s: out of memory", path);
#else
  if (gz) die("%s: gzip file, but cnnrun was built without zlib", path);
  FILE *f = fdopen(fd, "rb");
  if (!f) die("%s: %s", path, strerror(errno));
#endif
  size_t cap = 1 << 16, limit = MAX_INPUT_BYTES + 1, promised = 0;
  for (;;) {
    if (!b.p || b.n == cap) {
      if (b.p) cap = cap * 2 < limit ? cap * 2 : limit;
      if (!(b.p = realloc(b.p, cap))) die("%s: out of memory", path);
    }
#ifdef CNNRUN_HAVE_ZLIB
    int got = gzread(f, b.p + b.n, (unsigned)(cap - b.n > (1u << 30) ? (1u << 30) : cap - b.n));
    if (got < 0) {
      int e;
      die("%s: %s", path, gzerror(f, &e));
    }
#else
    size_t got = fread(b.p + b.n, 1, cap - b.n, f);
    if (ferror(f)) die("%s: read error", path);
#endif
    if (got == 0) break;
    b.n += (size_t)got;
    if (gz && idx_bound && !promised && b.n >= 4 && (promised = idx_total(b.p, b.n)) != 0)
      limit = promised == SIZE_MAX ? MAX_INPUT_BYTES + 1 : promised + 1; /* one more byte shows trailing data */
    if (b.n >= limit) break;
  }
#ifdef CNNRUN_HAVE_ZLIB
  gzclose(f);
#else
  fclose(f);
#endif
  if (b.n > MAX_INPUT_BYTES) die("%s: more than %zu bytes%s", path, MAX_INPUT_BYTES, gz ? " once decompressed" : "");
  if (promised && promised != SIZE_MAX && b.n > promised)
    die("%s: more data than its idx header promises (%zu bytes) once decompressed", path, promised);
  return b;
}

/* An idx file (yann.lecun.com/exdb/mnist): 0 0 type ndim, ndim big-endian u32 dims, data. */
typedef struct idx {
  int type, ndim;
  int64_t dims[4], count; /* count = product of dims */
  const unsigned char *data;
} idx;

static size_t idx_elem_size(int type) {
  switch (type) {
  case 0x08: case 0x09: return 1;
  case 0x0B: return 2;
  case 0x0C: case 0x0D: return 4;
  case 0x0E: return 8;
  }
  return 0;
}

/* Nonzero if b is a well-formed idx file (the size must match its header exactly). */
static int idx_parse(const blob *b, idx *x) {
  if (b->n < 4 || b->p[0] || b->p[1] || !idx_elem_size(b->p[2]) || b->p[3] < 1 || b->p[3] > 4) return 0;
  x->type = b->p[2];
  x->ndim = b->p[3];
  size_t hdr = 4 + 4 * (size_t)x->ndim;
  if (b->n < hdr) return 0;
  x->count = 1;
  for (int k = 0; k < x->ndim; k++) {
    const unsigned char *d = b->p + 4 + 4 * k;
    x->dims[k] = (int64_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
    x->count *= x->dims[k];
    if (x->count > (int64_t)b->n) return 0; /* also keeps the product from overflowing */
  }
  x->data = b->p + hdr;
  return b->n - hdr == (size_t)x->count * idx_elem_size(x->type) ? 1 : -1; /* -1: an idx header, another size */
}

/* Element i of an idx array as a double (big-endian data). */
static double idx_value(const idx *x, int64_t i) {
  size_t es = idx_elem_size(x->type);
  const unsigned char *p = x->data + (size_t)i * es;
  uint64_t u = 0;
  for (size_t k = 0; k < es; k++) u = u << 8 | p[k];
  switch (x->type) {
  case 0x08: return p[0];
  case 0x09: return (int8_t)p[0];
  case 0x0B: return (int16_t)u;
  case 0x0C: return (int32_t)u;
  case 0x0D: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); return f; }
  default: { double d; memcpy(&d, &u, 8); return d; }
  }
}

/* ---- infer ------------------------------------------------------------------------------ */
typedef struct samples {
  unsigned char *data; /* n samples in the model's input dtype */
  int64_t n;
} samples;

/* idx -> the model's input: u8 stays u8 (u8 models); for f32 models u8 becomes x/255, other
 * types their value. */
static samples idx_samples(const char *path, const idx *x, const cnnrt_tensor_info *in, int64_t per) {
  samples s = {NULL, x->dims[0]};
  if (x->count / (x->dims[0] ? x->dims[0] : 1) != per)
    die("%s: idx samples have %lld values, the model input '%s' takes %lld per sample", path,
        (long long)(x->dims[0] ? x->count / x->dims[0] : 0), in->name, (long long)per);
  if (in->dtype != CNNRT_U8 && in->dtype != CNNRT_F32)
    die("the model input is %s; idx files feed u8 or f32 inputs (--format raw feeds any dtype)", dtype_name(in->dtype));
  if (in->dtype == CNNRT_U8 && x->type != 0x08) die("%s: the model takes u8 images, the idx file is not u8", path);
  s.data = malloc((size_t)x->count * dtype_size(in->dtype) + 1);
  if (!s.data) die("%s: out of memory", path);
  for (int64_t i = 0; i < x->count; i++) {
    if (in->dtype == CNNRT_U8) s.data[i] = x->data[i];
    else ((float *)s.data)[i] = (float)(x->type == 0x08 ? x->data[i] / 255.0 : idx_value(x, i));
  }
  return s;
}

static samples load_samples(const opts *o, const cnnrt_tensor_info *in, int batch) {
  int64_t per = (int64_t)(in->bytes / dtype_size(in->dtype)) / batch; /* values per sample */
  blob b = read_file(o->input, strcmp(o->format, "raw") != 0);
  idx x;
  int is_idx = strcmp(o->format, "raw") != 0 ? idx_parse(&b, &x) : 0;
  if (!strcmp(o->format, "idx") && is_idx != 1) die("%s: not an idx file (bad header or size)", o->input);
  if (is_idx < 0) /* auto: never read an idx file with the wrong size as raw bytes in silence */
    die("%s: an idx header (type 0x%02x, %d dims) promising %lld bytes of data, but the file holds %zu (truncated, or "
        "trailing data?); --format raw reads it as raw samples", o->input, x.type, x.ndim,
        (long long)(x.count * (int64_t)idx_elem_size(x.type)), b.n - (4 + 4 * (size_t)x.ndim));
  if (is_idx) {
    samples s = idx_samples(o->input, &x, in, per);
    free(b.p);
    return s;
  }
  size_t sb = in->bytes / (size_t)batch;
  if (b.n == 0 || b.n % sb != 0)
    die("%s: %zu bytes is not a whole number of samples of %zu bytes (%s, %lld values each)", o->input, b.n, sb,
        dtype_name(in->dtype), (long long)per);
  return (samples){b.p, (int64_t)(b.n / sb)};
}

/* Labels: idx1 u8, or raw bytes, one per sample. */
static unsigned char *load_labels(const char *path, int64_t n) {
  blob b = read_file(path, 1);
  idx x;
  const unsigned char *p = b.p;
  size_t count = b.n;
  int is_idx = idx_parse(&b, &x);
  if (is_idx < 0)
    die("%s: an idx header promising %lld labels' bytes, but the file holds %zu after it (truncated, or trailing data?)", path,
        (long long)(x.count * (int64_t)idx_elem_size(x.type)), b.n - (4 + 4 * (size_t)x.ndim));
  if (is_idx) {
    if (x.type != 0x08 || x.ndim != 1) die("%s: labels must be a 1-d u8 idx file", path);
    p = x.data;
    count = (size_t)x.count;
  }
  if ((int64_t)count != n) die("%s: %zu labels for %lld samples", path, count, (long long)n);
  unsigned char *l = malloc(count + 1);
  if (!l) die("%s: out of memory", path);
  memcpy(l, p, count);
  free(b.p);
  return l;
}

/* Runs every sample (the last micro-batch padded with zeros); out receives per output k a
 * contiguous [n, ...] block. */
/* Runs micro-batches [mb0, mb1) of the samples through m into out (every output, [samples, ...]
 * per output in order). */
static void run_samples(const opts *o, cnnrt_model *m, const samples *s, unsigned char *out, int64_t mb0, int64_t mb1) {
  int b = cnnrt_batch_size(m), no = cnnrt_num_outputs(m);
  size_t ib = cnnrt_input_bytes(m), ob = cnnrt_output_bytes(m), sib = ib / (size_t)b;
  unsigned char *in = calloc((size_t)o->batches, ib), *res = malloc((size_t)o->batches * ob);
  if (!in || !res) die("out of memory for %d micro-batches", o->batches);
  for (int64_t first = mb0; first < mb1; first += o->batches) {
    int nb = (int)(mb1 - first < o->batches ? mb1 - first : o->batches);
    int64_t s0 = first * b, ns = s->n - s0 < (int64_t)nb * b ? s->n - s0 : (int64_t)nb * b;
    memset(in, 0, (size_t)nb * ib);
    memcpy(in, s->data + (size_t)s0 * sib, (size_t)ns * sib);
    if (cnnrt_infer(m, in, (size_t)nb * ib, res, (size_t)nb * ob, nb) != CNNRT_OK) die("%s", cnnrt_last_error());
    size_t off = 0, base = 0; /* offset of output k inside a micro-batch / inside out */
    for (int k = 0; k < no; k++) {
      cnnrt_tensor_info t;
      cnnrt_output_info(m, k, &t);
      size_t per = t.bytes / (size_t)b;
      for (int64_t j = 0; j < ns; j++)
        memcpy(out + base + (size_t)(s0 + j) * per, res + (size_t)(j / b) * ob + off + (size_t)(j % b) * per, per);
      off += t.bytes;
      base += per * (size_t)s->n;
    }
  }
  free(in);
  free(res);
}

typedef struct replica_run {
  const opts *o;
  cnnrt_model **ms;
  const samples *s;
  unsigned char *out;
  int64_t nmb;
} replica_run;

/* Replica i: its contiguous share of the micro-batches. */
static void run_replica(int i, void *p) {
  const replica_run *r = p;
  int R = r->o->replicas;
  run_samples(r->o, r->ms[i], r->s, r->out, r->nmb * i / R, r->nmb * (i + 1) / R);
}

/* Prints the top-k classes of each sample of output 0; returns the number of top-1 hits. */
static int64_t print_top(const opts *o, const float *y, int64_t n, int64_t classes, const unsigned char *labels) {
  int k = o->top < classes ? o->top : (int)classes;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = y + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; c++)
      if (row[c] > row[best]) best = c;
    hits += labels && labels[i] == best;
    if (!o->top) continue;
    printf("sample %lld:", (long long)i);
    unsigned char *used = calloc((size_t)classes, 1);
    for (int r = 0; r < k && used; r++) {
      int64_t c = -1;
      for (int64_t j = 0; j < classes; j++)
        if (!used[j] && (c < 0 || row[j] > row[c])) c = j;
      used[c] = 1;
      printf(" %lld (%.4g)", (long long)c, row[c]);
    }
    free(used);
    if (labels) printf("  label %d", labels[i]);
    printf("\n");
  }
  return hits;
}

/* Written as PATH.tmp.PID and renamed into place (common/cm.h): a full disk leaves no file. */
static void write_output(const char *path, const void *p, size_t n) {
  cm_out out;
  char why[512];
  if (cm_out_open(&out, path, 0666, why, sizeof why)) die("%s: %s", path, why);
  if (fwrite(p, 1, n, out.f) != n) {
    int e = errno;
    cm_out_abort(&out);
    die("%s: write error: %s (nothing was written)", path, strerror(e));
  }
  if (cm_out_commit(&out, why, sizeof why)) die("%s: %s", path, why);
}

/* Checks every output path of the command before its work starts (common/cm.h): not a
 * directory, not one of its inputs, its directory writable. */
static void check_outputs(const opts *o) {
  const char *in[] = {o->model, o->input, o->labels, o->restore, o->checkpoint};
  const char *out[] = {o->output, o->trace};
  char why[512];
  for (int k = 0; k < 2; k++)
    if (out[k] && cm_check_output(out[k], in, 5, why, sizeof why)) die("%s %s", out[k], why);
}

static int cmd_infer(const opts *o) {
  cnnrt_model *m = open_model(o);
  cnnrt_tensor_info in, out0;
  cnnrt_input_info(m, &in);
  cnnrt_output_info(m, 0, &out0);
  int b = cnnrt_batch_size(m);
  samples s = load_samples(o, &in, b);
  if (s.n == 0) die("%s: no samples", o->input);
  unsigned char *labels = o->labels ? load_labels(o->labels, s.n) : NULL;
  size_t total = cnnrt_output_bytes(m) / (size_t)b * (size_t)s.n;
  unsigned char *out = malloc(total);
  if (!out) die("out of memory for the outputs of %lld samples", (long long)s.n);
  int64_t nmb = (s.n + b - 1) / b;
  if (o->replicas > 1) { /* the micro-batches split in contiguous shares, one per instance */
    cnnrt_model *ms[1024];
    open_replicas(o, ms);
    replica_run rr = {o, ms, &s, out, nmb};
    run_parallel(o->replicas, run_replica, &rr);
    for (int i = 0; i < o->replicas; i++) cnnrt_close(ms[i]);
  } else {
    run_samples(o, m, &s, out, 0, nmb);
  }
  if (o->output) write_output(o->output, out, total);
  if ((o->top || labels) && out0.dtype != CNNRT_F32) die("output '%s' is %s, not f32", out0.name, dtype_name(out0.dtype));
  int64_t classes = (int64_t)(out0.bytes / 4) / b;
  int64_t hits = (o->top || labels) ? print_top(o, (const float *)out, s.n, classes, labels) : 0;
  if (labels) printf("accuracy %.4f (%lld/%lld)\n", (double)hits / (double)s.n, (long long)hits, (long long)s.n);
  fprintf(stderr, "cnnrun: %lld samples%s%s\n", (long long)s.n, o->output ? ", outputs written to " : "",
          o->output ? o->output : "");
  free(labels);
  free(out);
  free(s.data);
  close_model(o, m);
  return 0;
}

#include "cnnrun_train.inc"

int main(int argc, char **argv) {
  opts o;
  parse_args(&o, argc, argv);
  check_outputs(&o);
  if (!strcmp(o.cmd, "info")) return cmd_info(&o);
  if (!strcmp(o.cmd, "benchmark")) return cmd_benchmark(&o);
  if (!strcmp(o.cmd, "train")) {
    dist_init(o.model, o.comm_timeout, &argc, &argv); /* under mpirun: one of the processes training together */
    int rc = cmd_train(&o);
    dist_finalize();
    return rc;
  }
  if (!strcmp(o.cmd, "validate")) return cmd_validate(&o);
  return cmd_infer(&o);
}
