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
#define OPT_DATA_DIR {"--data-dir", "DIR", "where the dataset files are (default /usr/share/datasets/<dataset>); folder: DIR/train/CLASS/*.jpg|png, DIR/val/CLASS/...; tfrecord: DIR/train-NNNNN-of-MMMMM, DIR/validation-... (TFDS: DIR/NAME-train.tfrecord-NNNNN-of-MMMMM)"}
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
  if (!strcmp(cmd, "benchmark") || !strcmp(cmd, "infer") || !strcmp(cmd, "train"))
    printf("Under mpirun -np N (libcnnrt_mpi, docs/mpi.md) every rank runs its share: %s; only rank 0\n"
           "prints, and --trace F is written as F (rank 0) and F.rankK.\n",
           !strcmp(cmd, "train") ? "its replicas of the model's --replicas"
           : !strcmp(cmd, "infer") ? "a contiguous part of the micro-batches, outputs gathered on rank 0"
                                   : "one model instance per rank, img/s summed");
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

#include "cnnrun_train.inc"

int main(int argc, char **argv) {
  opts o;
  parse_args(&o, argc, argv);
  check_outputs(&o);
  if (!strcmp(o.cmd, "info")) return cmd_info(&o);
  if (!strcmp(o.cmd, "validate")) return cmd_validate(&o);
  /* under mpirun: one of the processes training or serving together (docs/mpi.md) */
  dist_init(o.model, o.comm_timeout, &argc, &argv);
  char trace[4096];
  if (dist_rank() > 0 && o.trace) { /* a trace per rank: FILE (rank 0), FILE.rankK */
    snprintf(trace, sizeof trace, "%s.rank%d", o.trace, dist_rank());
    o.trace = trace;
  }
  if (dist_rank() > 0 && !freopen("/dev/null", "w", stdout)) die("/dev/null: %s", strerror(errno)); /* rank 0 prints */
  int rc = !strcmp(o.cmd, "benchmark") ? cmd_benchmark(&o) : !strcmp(o.cmd, "train") ? cmd_train(&o) : cmd_infer(&o);
  dist_finalize();
  return rc;
}
