/* test_weights.c — safetensors I/O (frontend/weights.c): save/load round trip, F16/BF16
 * conversion, and one test per kind of corrupt file (truncated, bad JSON, offsets out of
 * range or overlapping, wrong size, wrong shape, missing/extra/duplicate tensor, unsupported
 * dtype, gaps or bytes after the data, a FIFO), NaN/Inf values and a negative running_var,
 * each checked for the right message; plus every truncation and random byte flips of a valid
 * file, which must fail (or load) cleanly, never crash. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ir.h"
#include "weights.h"

static char g_dir[64];

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static const char *tmp_path(const char *name) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 256, "%s/%s", g_dir, name);
  return p;
}

/* A model-like graph: an input plus conv/bn/dense params (values filled when fill != 0). */
static ir_graph *make_graph(int fill) {
  ir_graph *g = ir_graph_new("wtest", 2);
  ir_add_input(g, "input", IR_F32, SHAPE(2, 3, 6, 6));
  int ids[7];
  ids[0] = ir_add_param(g, "conv1/weight", SHAPE(4, 3, 3, 3), 1);
  ids[1] = ir_add_param(g, "conv1/bias", SHAPE(4), 1);
  ids[2] = ir_add_param(g, "bn1/gamma", SHAPE(4), 1);
  ids[3] = ir_add_param(g, "bn1/beta", SHAPE(4), 1);
  ids[4] = ir_add_param(g, "bn1/running_mean", SHAPE(4), 0);
  ids[5] = ir_add_param(g, "bn1/running_var", SHAPE(4), 0);
  ids[6] = ir_add_param(g, "fc/weight", SHAPE(10, 36), 1);
  if (fill)
    for (int k = 0; k < 7; k++) {
      ir_value *v = &g->values[ids[k]];
      for (int64_t i = 0; i < ir_shape_numel(&v->shape); i++) v->data[i] = (float)(k * 1000 + i) * 0.37f - 5.0f;
    }
  return g;
}

static ir_graph *mk_full(void) { return make_graph(0); }

/* A two-param graph for hand-written files: "a/weight" [2,2], "a/bias" [2]. */
static ir_graph *small_graph(void) {
  ir_graph *g = ir_graph_new("small", 1);
  ir_add_param(g, "a/weight", SHAPE(2, 2), 1);
  ir_add_param(g, "a/bias", SHAPE(2), 1);
  return g;
}

static void write_raw(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); exit(2); }
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

/* Writes a safetensors file from a header string and data bytes. */
static void write_st(const char *path, const char *hdr, const void *data, size_t n) {
  size_t h = strlen(hdr);
  unsigned char *buf = malloc(8 + h + n + 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(buf + 8, hdr, h);
  if (n) memcpy(buf + 8 + h, data, n);
  write_raw(path, buf, 8 + h + n);
  free(buf);
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)sz + 1);
  *n = fread(p, 1, (size_t)sz, f);
  fclose(f);
  return p;
}

/* Loads path into a fresh small graph; expects failure with msg containing every needle. */
static void expect_error(ir_graph *(*mk)(void), const char *path, const char *what, const char *n1, const char *n2) {
  ir_graph *g = mk();
  ir_diag d = {0};
  int rc = fe_load_safetensors(g, path, 0, &d);
  CHECK(rc == -1 && d.failed, "%s: expected an error, got rc %d", what, rc);
  if (rc == -1) {
    CHECK(n1 == NULL || strstr(d.msg, n1), "%s: message lacks '%s': %s", what, n1, d.msg);
    CHECK(n2 == NULL || strstr(d.msg, n2), "%s: message lacks '%s': %s", what, n2, d.msg);
    CHECK(d.loc.file && !strcmp(d.loc.file, path), "%s: diagnostic does not name the file", what);
  }
  ir_graph_free(g);
}

static const float SMALL[6] = {1, 2, 3, 4, 5, 6}; /* a/weight then a/bias, 24 bytes */

/* A hand-written header over the first nbytes of SMALL: loading it must fail (expect_error). */
typedef struct bad_file {
  const char *hdr;
  size_t nbytes;
  const char *what, *n1, *n2;
} bad_file;

static void expect_errors(const char *path, const bad_file *b, size_t n) {
  static const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* SMALL, then 8 more bytes */
  for (size_t k = 0; k < n; k++) {
    write_st(path, b[k].hdr, data, b[k].nbytes);
    expect_error(small_graph, path, b[k].what, b[k].n1, b[k].n2);
  }
}
#define OK_W "\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
#define OK_B "\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}"

static void test_round_trip(void) {
  ir_graph *a = make_graph(1), *b = make_graph(0);
  ir_diag d = {0};
  const char *p = tmp_path("rt.safetensors");
  CHECK(fe_save_safetensors(a, p, &d) == 0, "save failed: %s", d.msg);
  CHECK(fe_load_safetensors(b, p, 0, &d) == 0, "load failed: %s", d.msg);
  for (int v = 0; v < a->n_values; v++) {
    if (a->values[v].kind != IR_VAL_PARAM) continue;
    size_t n = (size_t)ir_shape_numel(&a->values[v].shape);
    CHECK(!memcmp(a->values[v].data, b->values[v].data, n * 4), "round trip changed '%s'", a->values[v].name);
  }
  size_t n;
  unsigned char *raw = read_all(p, &n);
  CHECK(raw && n > 8, "saved file unreadable");
  if (raw) {
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | raw[i];
    CHECK(h % 8 == 0, "header length %llu not padded to 8", (unsigned long long)h);
    CHECK(raw[8] == '{', "header does not start with '{'");
    CHECK(n == 8 + h + 4 * (108 + 4 * 5 + 360), "file size %zu unexpected", n);
    CHECK(!memmem(raw, n, "\"input\"", 7), "the input value was saved as a tensor");
    free(raw);
  }
  /* the temporary file is gone after the rename */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp > /dev/null", g_dir);
  CHECK(system(cmd) != 0, "a temporary file was left behind");
  /* saving over an existing file replaces it */
  CHECK(fe_save_safetensors(b, p, &d) == 0, "second save failed: %s", d.msg);
  ir_diag e = {0};
  CHECK(fe_save_safetensors(a, "/nonexistent-dir/x.safetensors", &e) == -1 && strstr(e.msg, "cannot create"),
        "save into a missing directory: %s", e.msg);
  ir_graph_free(a);
  ir_graph_free(b);
}

static void test_hand_written_ok(void) {
  /* key order free, whitespace and padding allowed, metadata ignored, escapes decoded */
  const char *p = tmp_path("ok.safetensors");
  write_st(p, " { \"__metadata__\" : {\"format\":\"pt\", \"k\\u00e9y\":\"v\\\"\"},\n " OK_B ",\t"
              "\"a\\/weight\":{\"shape\":[2,2],\"data_offsets\":[0,16],\"dtype\":\"F32\"} }    ",
           SMALL, sizeof SMALL);
  ir_graph *g = small_graph();
  ir_diag d = {0};
  CHECK(fe_load_safetensors(g, p, 0, &d) == 0, "valid hand-written file rejected: %s", d.msg);
  float *w = g->values[ir_find_value(g, "a/weight")].data, *bias = g->values[ir_find_value(g, "a/bias")].data;
  CHECK(w[0] == 1 && w[3] == 4 && bias[0] == 5 && bias[1] == 6, "values misread");
  ir_graph_free(g);
}

static void test_f16_bf16(void) {
  /* a/weight F16: 1, -2, 0.5, 65504; a/bias BF16: 1, -3.  Then subnormal/inf F16. */
  const uint16_t data[6] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x3F80, 0xC040};
  const char *p = tmp_path("half.safetensors");
  write_st(p, "{\"a/weight\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
              "\"a/bias\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
           data, sizeof data);
  ir_graph *g = small_graph();
  ir_diag d = {0};
  CHECK(fe_load_safetensors(g, p, 0, &d) == 0, "F16/BF16 file rejected: %s", d.msg);
  float *w = g->values[ir_find_value(g, "a/weight")].data, *b = g->values[ir_find_value(g, "a/bias")].data;
  CHECK(w[0] == 1.0f && w[1] == -2.0f && w[2] == 0.5f && w[3] == 65504.0f, "F16 values %g %g %g %g", w[0], w[1], w[2], w[3]);
  CHECK(b[0] == 1.0f && b[1] == -3.0f, "BF16 values %g %g", b[0], b[1]);
  const uint16_t sub[6] = {0x0001, 0x8200, 0x7C00, 0xFC00, 0, 0};
  write_st(p, "{\"a/weight\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
              "\"a/bias\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
           sub, sizeof sub);
  ir_diag e = {0};
  CHECK(fe_load_safetensors(g, p, 0, &e) == -1 && strstr(e.msg, "tensor 'a/weight': element 2 is inf"),
        "an infinite weight must be refused by default: %s", e.msg);
  CHECK(fe_load_safetensors(g, p, 1, &d) == 0, "F16 specials rejected with allow_nonfinite: %s", d.msg);
  CHECK(w[0] == 0x1p-24f && w[1] == -0x1p-15f && isinf(w[2]) && w[2] > 0 && isinf(w[3]) && w[3] < 0,
        "F16 subnormal/inf %g %g %g %g", w[0], w[1], w[2], w[3]);
  ir_graph_free(g);
}

static void test_truncated(void) {
  ir_graph *a = make_graph(1);
  ir_diag d = {0};
  const char *p = tmp_path("full.safetensors"), *q = tmp_path("trunc.safetensors");
  CHECK(fe_save_safetensors(a, p, &d) == 0, "save failed: %s", d.msg);
  size_t n;
  unsigned char *raw = read_all(p, &n);
  size_t cuts[] = {0, 3, 8, 9, 40, n / 2, n - 1};
  for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
    write_raw(q, raw, cuts[k]);
    expect_error(small_graph, q, "truncated", "truncated", NULL);
  }
  /* every cut fails cleanly on the real graph too (no crash, ASan-clean) */
  for (size_t cut = 0; cut < n; cut += (cut < 600 ? 1 : 97)) {
    write_raw(q, raw, cut);
    ir_graph *g = make_graph(0);
    ir_diag e = {0};
    CHECK(fe_load_safetensors(g, q, 0, &e) == -1, "truncated to %zu bytes but loaded", cut);
    ir_graph_free(g);
  }
  /* header length field larger than the file */
  unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
  write_raw(q, big, 10);
  expect_error(small_graph, q, "header length past end", "truncated", NULL);
  unsigned char huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
  write_raw(q, huge, 10);
  expect_error(small_graph, q, "absurd header length", "limit", NULL);
  free(raw);
  ir_graph_free(a);
}

static void test_bad_json(void) {
  const char *p = tmp_path("json.safetensors");
  static const char *bad[] = {
      "",                                           /* header length 0 */
      "[1,2]",                                      /* not an object */
      "{",                                          /* unterminated */
      "{\"a/weight\" {}}",                          /* missing colon */
      "{\"a/weight\":{\"dtype\":\"F32\",}}",        /* trailing comma */
      "{\"a/weight:{}}",                            /* unterminated string */
      "{\"a/\x01weight\":{}}",                      /* control character */
      "{\"a/\\qweight\":{}}",                       /* bad escape */
      "{\"a/\\ud800weight\":{}}",                   /* lone surrogate */
      "{\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}} x", /* trailing garbage */
      "{\"a/weight\":{\"dtype\":\"F32\",\"shape\":[02,2],\"data_offsets\":[0,16]}}",  /* leading zero */
      "{\"\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",           /* empty name */
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    write_st(p, bad[k], SMALL, sizeof SMALL);
    char what[64];
    snprintf(what, sizeof what, "bad JSON #%zu", k);
    expect_error(small_graph, p, what, "bad JSON header", NULL);
  }
}

/* Hand-written headers that must fail: well-formed JSON with the wrong schema, offsets out of
 * range or overlapping, and tensors that do not match the model. */
static void test_bad_headers(void) {
  static const bad_file bad[] = {
      {"{" OK_B ",\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"x\":1}}", 24, "unknown key", "a/weight", "unknown key 'x'"},
      {"{" OK_B ",\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2]}}", 24, "missing key", "a/weight", "missing 'data_offsets'"},
      {"{" OK_B ",\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", 24, "negative dim", "a/weight", "non-negative"},
      {"{" OK_B ",\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16.0]}}", 24, "fractional offset", "a/weight", "integers"},
      {"{" OK_B ",\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,99999999999999999999999]}}", 24, "huge offset", "a/weight", "too large"},
      {"{\"__metadata__\":{\"k\":1}," OK_W "," OK_B "}", 24, "metadata value not a string", "__metadata__", "string"},
      /* offsets */
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,32]}}", 24, "offsets past the data", "a/bias", "out of range"},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,16]}}", 24, "reversed offsets", "a/bias", "end before they begin"},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 24, "overlapping offsets", "overlap", "a/weight"},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,20]}}", 24, "size mismatch", "a/bias", "hold 4 bytes"},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}", 28, "a gap", "a/bias", "leave bytes 16..20 of the data section unused"},
      {"{" OK_W "," OK_B "}", 28, "bytes after the data", "4 bytes after the last tensor's data", NULL},
      {"{\"a/weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]},\"a/bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 32,
       "tensors at the start, bytes after them", "8 bytes after the last tensor's data", NULL},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[16,24]}}", 24, "overflowing shape", "a/bias", "or more"},
      /* the model's tensors */
      {"{\"a/weight\":{\"dtype\":\"F32\",\"shape\":[4,1],\"data_offsets\":[0,16]}," OK_B "}", 24, "wrong shape", "a/weight", "does not match the model's [2,2]"},
      {"{" OK_W "}", 16, "missing tensor", "missing", "'a/bias'"},
      {"{" OK_W "," OK_B ",\"a/extra\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[24,24]}}", 24, "extra tensor", "not parameters", "'a/extra'"},
      {"{" OK_W ",\"a/bias\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]}}", 24, "wrong dtype", "a/bias", "'I64' is not supported"},
      {"{" OK_W "," OK_B "," OK_B "}", 24, "duplicate tensor", "a/bias", "twice"},
  };
  expect_errors(tmp_path("hdr.safetensors"), bad, sizeof bad / sizeof *bad);
  expect_error(small_graph, tmp_path("does-not-exist"), "missing file", "cannot open", NULL);
  expect_error(small_graph, g_dir, "directory", "is a directory", NULL);
  const char *fifo = tmp_path("fifo.safetensors");
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
  expect_error(small_graph, fifo, "a FIFO (opened without blocking)", "is not a regular file (a FIFO)", NULL);
}

/* NaN/Inf values and a negative running variance are refused, naming the tensor and element,
 * unless allow_nonfinite (issue 26: they loaded without a word and gave NaN logits). */
static void test_values(void) {
  ir_graph *a = make_graph(1);
  const char *p = tmp_path("val.safetensors");
  ir_diag d = {0};
  float *var = a->values[ir_find_value(a, "bn1/running_var")].data, *w = a->values[ir_find_value(a, "fc/weight")].data;
  var[2] = -1.0f;
  CHECK(fe_save_safetensors(a, p, &d) == 0, "save: %s", d.msg);
  expect_error(mk_full, p, "negative running_var", "tensor 'bn1/running_var': element 2 is -1, a negative variance", NULL);
  var[2] = 1.0f, w[7] = NAN;
  CHECK(fe_save_safetensors(a, p, &d) == 0, "save: %s", d.msg);
  expect_error(mk_full, p, "NaN weight", "tensor 'fc/weight': element 7 is nan", "--allow-nonfinite");
  ir_graph *g = make_graph(0);
  CHECK(fe_load_safetensors(g, p, 1, &d) == 0 && isnan(g->values[ir_find_value(g, "fc/weight")].data[7]),
        "allow_nonfinite: %s", d.msg);
  ir_graph_free(g);
  ir_graph_free(a);
}

/* Random byte flips in a valid file: any result is fine as long as it is clean. */
static void test_fuzz(void) {
  ir_graph *a = make_graph(1);
  ir_diag d = {0};
  const char *p = tmp_path("fz.safetensors"), *q = tmp_path("fz2.safetensors");
  CHECK(fe_save_safetensors(a, p, &d) == 0, "save failed: %s", d.msg);
  size_t n;
  unsigned char *raw = read_all(p, &n), *mut = malloc(n);
  uint64_t s = 12345;
  for (int it = 0; it < 1500; it++) {
    memcpy(mut, raw, n);
    int flips = 1 + it % 3;
    for (int k = 0; k < flips; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(s >> 33) % (it % 2 ? n : (n < 600 ? n : 600)); /* mostly the header */
      mut[at] = (unsigned char)(s >> 17);
    }
    write_raw(q, mut, n);
    ir_graph *g = make_graph(0);
    ir_diag e = {0};
    int rc = fe_load_safetensors(g, q, 0, &e);
    CHECK(rc == 0 || (rc == -1 && e.failed && e.msg[0]), "fuzz #%d: rc %d without a message", it, rc);
    ir_graph_free(g);
  }
  free(raw);
  free(mut);
  ir_graph_free(a);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/cnnc_test_weights.XXXXXX");
  if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 2; }
  test_round_trip();
  test_hand_written_ok();
  test_f16_bf16();
  test_truncated();
  test_bad_json();
  test_bad_headers();
  test_values();
  test_fuzz();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_dir);
  return check_done("test_weights", g_failures);
}
