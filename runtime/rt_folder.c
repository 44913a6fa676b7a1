/* rt_folder.c — image folders as datasets (cnnrt_dataset_open_folder): the ImageNet layout
 * DIR/{train,val}/CLASS/...  listed once (classes and files in byte order, as torchvision's
 * ImageFolder), or TensorFlow's ImageNet TFRecord shards (cnnrt_dataset_open_tfrecord,
 * rt_tfrecord.c: a record stands for a file); images decoded and transformed when read
 * (rt_image.c) by a pool of decoder threads, which also decode the window after each read
 * ahead of time (the read-ahead: after it, or at the stride of the last two reads).
 *
 * The pool works on one job at a time: samples [first, first+count) of the read order into a
 * u8 buffer.  Workers and the reading thread take samples from the job by an index under the
 * mutex; a sample's decoding depends on its file and the shuffle seed alone, so the result is
 * the same for any number of threads.  A read that matches the running read-ahead joins it;
 * any other read, a shuffle, a limit or the close cancels it first (rt_folder_quiesce).  Reads
 * from several threads take turns (the mutex rd): a read owns the job until it has copied its
 * samples out, so another read cannot cancel or replace it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cm.h"
#include "rt_image.h"
#include "rt_internal.h"
#include "rt_tfrecord.h"

#define RT_FOLDER_MAX_CLASSES 100000
#define RT_FOLDER_MAX_FILES ((int64_t)1 << 27)
#define RT_FOLDER_MAX_DEPTH 8              /* subfolders below a class folder */
#define RT_FOLDER_MAX_IMAGE ((uint64_t)1 << 26) /* bytes of one image file */
#define RT_FOLDER_SKIP_TRIES 64            /* files tried in a row for one sample (skip_bad) */

typedef struct rt_job {
  const cnnrt_dataset *ds;
  int64_t first, count;
  uint8_t *px;      /* [count][c*h*w] */
  float *lab;       /* [count] */
  int64_t cap;      /* samples px and lab hold */
  int64_t taken, finished;
  int running, cancel;
  int64_t err_at;   /* the first failed sample's position, -1 if none */
  cnnrt_status err;
  char msg[640];
} rt_job;

struct rt_folder {
  char *root; /* DIR/train or DIR/val */
  char **classes;
  int n_classes;
  char *arena; /* relative paths "CLASS/.../file.jpg", NUL-terminated, one after another */
  size_t arena_n, arena_cap;
  size_t *off;  /* [n_files] into arena */
  int32_t *label;
  int64_t n_files, files_cap, ignored;
  uint8_t *bad; /* [n_files]: 1 once a file failed to decode (skip_bad) */
  rt_tfr *tfr;    /* TFRecord shards instead of files (off, label, arena unused) */
  int label_base; /* TFRecords: subtracted from the stored labels */
  rt_xform xf;
  int skip_bad;
  /* the pool */
  int n_threads, started;
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_mutex_t rd; /* held by a read from start to end: one read at a time (then mu) */
  pthread_cond_t work, done;
  int stop;
  rt_job job;
  int64_t decoded, skipped;
  double wait;
  char last_skipped[512];
  int64_t last_first, last_count, stride; /* the read-ahead's guess: the window `stride` after the last */
};

static double rt_now(void) { return 1e-9 * (double)rt_trace_now_ns(); } /* monotonic seconds */

/* ---- listing ------------------------------------------------------------------------------ */
static int rt_is_image_name(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int rt_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted names in path (no "." entries, nothing starting with '.'), malloc'd; *n. */
static cnnrt_status rt_list_dir(const char *path, char ***names, int64_t *n, int64_t max) {
  *names = NULL;
  *n = 0;
  DIR *d = opendir(path);
  if (!d) return rt_fail(CNNRT_IO, "%s: cannot open the folder: %s", path, strerror(errno));
  int64_t cap = 0;
  cnnrt_status s = CNNRT_OK;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (*n == max) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s: more than %lld entries", path, (long long)max);
      break;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      char **q = realloc(*names, (size_t)cap * sizeof *q);
      if (!q) {
        s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      *names = q;
    }
    if (!((*names)[*n] = strdup(e->d_name))) {
      s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
      break;
    }
    ++*n;
    errno = 0;
  }
  if (s == CNNRT_OK && errno) s = rt_fail(CNNRT_IO, "%s: cannot read the folder: %s", path, strerror(errno));
  closedir(d);
  if (s != CNNRT_OK) {
    for (int64_t i = 0; i < *n; i++) free((*names)[i]);
    free(*names);
    *names = NULL;
    *n = 0;
    return s;
  }
  if (*n) qsort(*names, (size_t)*n, sizeof **names, rt_cmp_str);
  return CNNRT_OK;
}

static void rt_free_names(char **names, int64_t n) {
  for (int64_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static cnnrt_status rt_add_file(rt_folder *f, const char *rel, int label) {
  size_t len = strlen(rel) + 1;
  if (f->n_files == RT_FOLDER_MAX_FILES)
    return rt_fail(CNNRT_BAD_MODEL, "%s: more than %lld images", f->root, (long long)RT_FOLDER_MAX_FILES);
  if (f->n_files == f->files_cap) {
    int64_t cap = f->files_cap ? f->files_cap * 2 : 1024;
    size_t *o = realloc(f->off, (size_t)cap * sizeof *o);
    if (o) f->off = o;
    int32_t *l = o ? realloc(f->label, (size_t)cap * sizeof *l) : NULL;
    if (l) f->label = l;
    if (!o || !l) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory listing the images", f->root);
    f->files_cap = cap;
  }
  if (f->arena_n + len > f->arena_cap) {
    size_t cap = f->arena_cap ? f->arena_cap * 2 : 1 << 16;
    while (cap < f->arena_n + len) cap *= 2;
    char *a = realloc(f->arena, cap);
    if (!a) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory listing the images", f->root);
    f->arena = a, f->arena_cap = cap;
  }
  memcpy(f->arena + f->arena_n, rel, len);
  f->off[f->n_files] = f->arena_n;
  f->label[f->n_files++] = label;
  f->arena_n += len;
  return CNNRT_OK;
}

/* The images under root/rel (a class folder or a subfolder `depth` levels below one): files in
 * byte order first, then each subfolder in byte order (torchvision walks sorted(os.walk)). */
static cnnrt_status rt_walk(rt_folder *f, const char *rel, int label, int depth) {
  char path[4096], sub[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", f->root, rel) >= sizeof path)
    return rt_fail(CNNRT_BAD_MODEL, "%s/%s: path longer than %zu bytes", f->root, rel, sizeof path - 1);
  char **names;
  int64_t n;
  cnnrt_status s = rt_list_dir(path, &names, &n, RT_FOLDER_MAX_FILES);
  if (s != CNNRT_OK) return s;
  unsigned char *is_dir = calloc((size_t)n + 1, 1);
  if (!is_dir) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  for (int64_t i = 0; s == CNNRT_OK && i < n; i++) {
    struct stat st;
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, names[i]) >= sizeof sub) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: path longer than %zu bytes", path, names[i], sizeof sub - 1);
      break;
    }
    if (stat(sub, &st) != 0) { /* a dangling link: the open stops, naming it */
      s = rt_fail(CNNRT_IO, "%s: %s", sub, strerror(errno));
      break;
    }
    if (S_ISDIR(st.st_mode)) is_dir[i] = 1;
    else if (S_ISREG(st.st_mode) && rt_is_image_name(names[i])) {
      snprintf(sub, sizeof sub, "%s/%s", rel, names[i]);
      s = rt_add_file(f, sub, label);
    } else f->ignored++;
  }
  for (int64_t i = 0; s == CNNRT_OK && i < n; i++) {
    if (!is_dir[i]) continue;
    if (depth == RT_FOLDER_MAX_DEPTH) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: folders nested more than %d deep below the class folder (a link loop?)", path,
                  names[i], RT_FOLDER_MAX_DEPTH);
      break;
    }
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", rel, names[i]) >= sizeof sub) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: path longer than %zu bytes", path, names[i], sizeof sub - 1);
      break;
    }
    s = rt_walk(f, sub, label, depth + 1);
  }
  free(is_dir);
  rt_free_names(names, n);
  return s;
}

/* The class folders of root (sorted), into *classes; plain files at the top are counted in
 * *ignored. */
static cnnrt_status rt_list_classes(const char *root, char ***classes, int *n_classes, int64_t *ignored) {
  char **names;
  int64_t n, k = 0;
  cnnrt_status s = rt_list_dir(root, &names, &n, RT_FOLDER_MAX_CLASSES * 4);
  if (s != CNNRT_OK) return s;
  for (int64_t i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, names[i]) >= sizeof path || stat(path, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      if (ignored) ++*ignored;
      free(names[i]);
      continue;
    }
    names[k++] = names[i];
  }
  if (k == 0) {
    free(names);
    return rt_fail(CNNRT_BAD_MODEL, "%s: no class folders (an image folder holds DIR/train/CLASS/*.jpg and DIR/val/CLASS/*.jpg)",
                   root);
  }
  if (k > RT_FOLDER_MAX_CLASSES) {
    rt_free_names(names, k);
    return rt_fail(CNNRT_BAD_MODEL, "%s: %lld class folders, at most %d", root, (long long)k, RT_FOLDER_MAX_CLASSES);
  }
  *classes = names;
  *n_classes = (int)k;
  return CNNRT_OK;
}

static cnnrt_status rt_check_dir(const char *path, const char *dir, const char *split) {
  struct stat st;
  if (stat(path, &st) != 0)
    return rt_fail(CNNRT_IO, "%s: %s (an image folder holds %s/train/CLASS/... and %s/val/CLASS/...; this is the %s split)",
                   path, strerror(errno), dir, dir, split);
  if (!S_ISDIR(st.st_mode)) return rt_fail(CNNRT_IO, "%s: not a folder", path);
  return CNNRT_OK;
}

/* ---- the pool ----------------------------------------------------------------------------- */
/* Decodes file (or, with skip_bad, the next files after it that decode) into out; its label into
 * *label.  Called without the mutex. */
static cnnrt_status rt_decode(rt_folder *f, uint64_t seed, int64_t file, uint8_t *out, float *label) {
  for (int tries = 0;; tries++) {
    cnnrt_status s = CNNRT_OK;
    char path[4200], why[256];
    if (f->tfr) rt_tfr_describe(f->tfr, file, path, sizeof path);
    else snprintf(path, sizeof path, "%s/%s", f->root, f->arena + f->off[file]);
    if (!__atomic_load_n(&f->bad[file], __ATOMIC_RELAXED)) {
      size_t len = 0;
      uint8_t *data = NULL;
      int64_t lab = 0;
      if (f->tfr) {
        s = rt_tfr_sample(f->tfr, file, &data, &len, &lab);
        /* compared before subtracting: a stored label near INT64_MIN/MAX must not overflow
         * (label_base and n_classes are within +-2^24) */
        if (s == CNNRT_OK && (lab < f->label_base || lab >= (int64_t)f->label_base + f->n_classes))
          s = rt_fail(CNNRT_BAD_MODEL, "%s: label %lld, outside %d..%d (%d classes, label base %d)", path, (long long)lab,
                      f->label_base, f->label_base + f->n_classes - 1, f->n_classes, f->label_base);
        else if (s == CNNRT_OK) lab -= f->label_base;
      } else {
        data = (uint8_t *)cm_read_regular(path, RT_FOLDER_MAX_IMAGE, &len, why, sizeof why);
        if (!data) s = rt_fail(CNNRT_IO, "%s: %s", path, why);
        lab = f->label[file];
      }
      if (s == CNNRT_OK) {
        uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(file + 1));
        s = rt_image_load(data, len, path, &f->xf, rt_splitmix(&x), out);
      }
      free(data);
      if (s == CNNRT_OK) {
        *label = (float)lab;
        pthread_mutex_lock(&f->mu);
        f->decoded++;
        pthread_mutex_unlock(&f->mu);
        return CNNRT_OK;
      }
      if (!f->skip_bad) return s;
      /* counted by the thread that marks it: two threads that decode the file at once count it
       * once.  (With decoder threads, last_skipped is the last marked in time.) */
      if (!__atomic_exchange_n(&f->bad[file], 1, __ATOMIC_RELAXED)) {
        pthread_mutex_lock(&f->mu);
        f->skipped++;
        snprintf(f->last_skipped, sizeof f->last_skipped, "%s", cnnrt_last_error());
        pthread_mutex_unlock(&f->mu);
      }
    }
    if (tries + 1 == RT_FOLDER_SKIP_TRIES || tries + 1 == f->n_files) {
      char last[sizeof f->last_skipped];
      pthread_mutex_lock(&f->mu);
      memcpy(last, f->last_skipped, sizeof last);
      pthread_mutex_unlock(&f->mu);
      return rt_fail(CNNRT_BAD_MODEL, "%s: %d files in a row from here fail to decode (the last: %s)", path, tries + 1, last);
    }
    file = (file + 1) % f->n_files;
  }
}

/* Takes and decodes samples of the running job until none are left.  Called with the mutex
 * held; returns with it held. */
static void rt_work(rt_folder *f) {
  rt_job *j = &f->job;
  size_t per = (size_t)f->xf.out_c * (size_t)f->xf.out_h * (size_t)f->xf.out_w;
  while (j->running && !j->cancel && j->taken < j->count) {
    int64_t i = j->taken++;
    const cnnrt_dataset *ds = j->ds;
    int64_t sample = ds->order[j->first + i], file = ds->pick ? ds->pick[sample] : sample;
    pthread_mutex_unlock(&f->mu);
    cnnrt_status s = rt_decode(f, ds->seed, file, j->px + (size_t)i * per, &j->lab[i]);
    char msg[sizeof j->msg];
    if (s != CNNRT_OK) snprintf(msg, sizeof msg, "%s", cnnrt_last_error());
    pthread_mutex_lock(&f->mu);
    if (s != CNNRT_OK && (j->err_at < 0 || i < j->err_at)) {
      j->err_at = i, j->err = s;
      memcpy(j->msg, msg, sizeof msg);
    }
    if (++j->finished == j->taken) pthread_cond_broadcast(&f->done);
  }
}

static void *rt_worker(void *arg) {
  rt_folder *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->stop) {
    if (f->job.running && !f->job.cancel && f->job.taken < f->job.count) rt_work(f);
    else pthread_cond_wait(&f->work, &f->mu);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* Cancels the running job and waits for the samples already taken.  Mutex held. */
static void rt_cancel(rt_folder *f) {
  if (!f->job.running) return;
  f->job.cancel = 1;
  while (f->job.finished < f->job.taken) pthread_cond_wait(&f->done, &f->mu);
  f->job.running = 0;
}

/* Starts samples [first, first+count) of ds's order as the job.  Mutex held. */
static cnnrt_status rt_start(rt_folder *f, const cnnrt_dataset *ds, int64_t first, int64_t count) {
  rt_job *j = &f->job;
  size_t per = (size_t)f->xf.out_c * (size_t)f->xf.out_h * (size_t)f->xf.out_w;
  if (count > j->cap) {
    uint8_t *px = malloc((size_t)count * per);
    float *lab = px ? malloc((size_t)count * sizeof *lab) : NULL;
    if (!lab) {
      free(px);
      return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for %lld decoded images", f->root, (long long)count);
    }
    free(j->px);
    free(j->lab);
    j->px = px, j->lab = lab, j->cap = count;
  }
  j->ds = ds, j->first = first, j->count = count;
  j->taken = j->finished = 0;
  j->cancel = 0, j->running = 1;
  j->err_at = -1;
  j->err = CNNRT_OK;
  j->msg[0] = 0;
  if (f->n_threads) pthread_cond_broadcast(&f->work);
  return CNNRT_OK;
}

static void rt_start_threads(rt_folder *f) {
  f->th = calloc((size_t)f->n_threads, sizeof *f->th);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, (size_t)8 << 20);
  for (int t = 0; f->th && t < f->n_threads; t++) {
    if (pthread_create(&f->th[t], &at, rt_worker, f) != 0) break;
    f->started++;
  }
  pthread_attr_destroy(&at);
  f->n_threads = f->started; /* fewer threads if the system refuses some: the reader decodes the rest */
}

cnnrt_status rt_folder_read(const cnnrt_dataset *ds, int64_t first, int64_t count, cnnrt_dtype dtype, void *images,
                            float *labels) {
  rt_folder *f = ds->folder;
  if (count == 0) return CNNRT_OK; /* nothing to decode (and the job's buffers may not exist yet) */
  pthread_mutex_lock(&f->rd); /* a read from another thread finishes first */
  double t0 = rt_now();
  pthread_mutex_lock(&f->mu);
  if (f->n_threads && !f->started) rt_start_threads(f);
  rt_job *j = &f->job;
  cnnrt_status s = CNNRT_OK;
  if (!(j->running && !j->cancel && j->ds == ds && j->first == first && j->count == count)) {
    rt_cancel(f);
    s = rt_start(f, ds, first, count);
  }
  if (s == CNNRT_OK) {
    rt_work(f); /* the reader decodes too */
    while (j->finished < j->count) pthread_cond_wait(&f->done, &f->mu);
    j->running = 0;
    if (j->err_at >= 0) s = rt_fail(j->err, "%s", j->msg);
  }
  if (s == CNNRT_OK) { /* under the mutex: no job runs, and another reader waits */
    size_t per = (size_t)ds->c * (size_t)ds->h * (size_t)ds->w;
    memcpy(labels, j->lab, (size_t)count * sizeof *labels);
    if (dtype == CNNRT_U8) memcpy(images, j->px, (size_t)count * per);
    else
      for (size_t p = 0; p < (size_t)count * per; p++) ((float *)images)[p] = j->px[p] / 255.0f;
  }
  f->wait += rt_now() - t0;
  /* the read-ahead: the same count at the stride of the last two reads of this count (a rank
   * under mpirun reads every N-th micro-batch), or right after this window */
  if (count != f->last_count) f->stride = count;
  else if (first > f->last_first) f->stride = first - f->last_first;
  f->last_first = first, f->last_count = count;
  int64_t next = f->stride <= ds->n - first ? first + f->stride : ds->n;
  if (s == CNNRT_OK && f->n_threads && next < ds->n)
    rt_start(f, ds, next, count < ds->n - next ? count : ds->n - next);
  pthread_mutex_unlock(&f->mu);
  pthread_mutex_unlock(&f->rd);
  return s;
}

void rt_folder_quiesce(rt_folder *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  rt_cancel(f);
  pthread_mutex_unlock(&f->mu);
}

void rt_folder_close(rt_folder *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  rt_cancel(f);
  f->stop = 1;
  pthread_cond_broadcast(&f->work);
  pthread_mutex_unlock(&f->mu);
  for (int t = 0; t < f->started; t++) pthread_join(f->th[t], NULL);
  pthread_mutex_destroy(&f->mu);
  pthread_mutex_destroy(&f->rd);
  pthread_cond_destroy(&f->work);
  pthread_cond_destroy(&f->done);
  free(f->th);
  free(f->job.px);
  free(f->job.lab);
  if (f->classes) rt_free_names(f->classes, f->n_classes);
  free(f->arena);
  free(f->off);
  free(f->label);
  free(f->bad);
  rt_tfr_close(f->tfr);
  free(f->root);
  free(f);
}

const char *rt_folder_class(const rt_folder *f, int k) {
  return f->classes && k >= 0 && k < f->n_classes ? f->classes[k] : NULL; /* TFRecords have no class names */
}

void rt_folder_stats(const rt_folder *f, cnnrt_dataset_stats *out) {
  rt_folder *m = (rt_folder *)f; /* the mutex */
  pthread_mutex_lock(&m->mu);
  out->decoded = f->decoded;
  out->skipped = f->skipped;
  out->ignored = f->ignored;
  out->wait_seconds = f->wait;
  snprintf(out->last_skipped, sizeof out->last_skipped, "%s", f->last_skipped);
  pthread_mutex_unlock(&m->mu);
}

static int rt_default_threads(void) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
  return n / 2 > 1 ? n / 2 : 1;
}

cnnrt_status rt_folder_open(cnnrt_dataset *ds, const char *dir, int test, int tfrecord, const cnnrt_folder_options *o) {
  rt_folder *f = calloc(1, sizeof *f);
  if (!f) return rt_fail(CNNRT_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&f->mu, NULL);
  pthread_mutex_init(&f->rd, NULL);
  pthread_cond_init(&f->work, NULL);
  pthread_cond_init(&f->done, NULL);
  ds->folder = f;
  size_t dl = strlen(dir);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  if (dl > 4000) return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset folder: the path is longer than 4000 bytes");
  char train[4100];
  snprintf(train, sizeof train, "%.*s/train", (int)dl, dir);
  if (!(f->root = malloc(dl + 8))) return rt_fail(CNNRT_OUT_OF_MEMORY, "out of memory");
  snprintf(f->root, dl + 8, "%.*s/%s", (int)dl, dir, test ? "val" : "train");
  cnnrt_status s = CNNRT_OK;
  if (tfrecord) {
    snprintf(f->root, dl + 8, "%.*s", (int)dl, dir);
    s = rt_tfr_open(f->root, test, &f->tfr, &f->n_files);
    f->n_classes = o->classes;
    f->label_base = o->label_base;
  } else {
    s = rt_check_dir(f->root, dir, test ? "validation" : "training");
    if (s == CNNRT_OK) s = rt_list_classes(f->root, &f->classes, &f->n_classes, &f->ignored);
  }
  if (s == CNNRT_OK && test && !tfrecord) { /* the same classes as the train split */
    char **tc = NULL;
    int tn = 0;
    s = rt_check_dir(train, dir, "training");
    if (s == CNNRT_OK) s = rt_list_classes(train, &tc, &tn, NULL);
    for (int k = 0; s == CNNRT_OK && (k < tn || k < f->n_classes); k++) {
      int c = k >= tn ? -1 : k >= f->n_classes ? 1 : strcmp(f->classes[k], tc[k]);
      if (c < 0)
        s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: a class that %s lacks (the splits must have the same class folders)", f->root,
                    f->classes[k], train);
      else if (c > 0)
        s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: a class that %s lacks (the splits must have the same class folders)", train,
                    tc[k], f->root);
    }
    if (tc) rt_free_names(tc, tn);
  }
  for (int k = 0; s == CNNRT_OK && !tfrecord && k < f->n_classes; k++) {
    int64_t before = f->n_files;
    s = rt_walk(f, f->classes[k], k, 0);
    if (s == CNNRT_OK && f->n_files == before)
      s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: no .jpg, .jpeg or .png files (an empty class folder)", f->root, f->classes[k]);
  }
  if (s == CNNRT_OK && !(f->bad = calloc((size_t)f->n_files, 1)))
    s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", f->root);
  if (s != CNNRT_OK) return s; /* the caller closes ds and with it f */
  rt_xform_default(&f->xf, o->augment == CNNRT_AUGMENT_NONE ? RT_XFORM_RESIZE : test ? RT_XFORM_CENTER : RT_XFORM_TRAIN,
                   o->channels, o->height, o->width);
  f->skip_bad = o->skip_bad != 0;
  f->n_threads = o->threads < 0 ? rt_default_threads() : o->threads;
  ds->n = f->n_files;
  ds->c = o->channels, ds->h = o->height, ds->w = o->width;
  ds->classes = f->n_classes;
  return CNNRT_OK;
}
