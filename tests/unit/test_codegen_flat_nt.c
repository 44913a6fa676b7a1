/* test_codegen_flat_nt.c — the flat (1x1 stride-1 GEMM) convs' non-temporal output stores
 * (gen_conv.c, flat_store_nt / flat_nt_ok).  Convs with a fused residual add, built with
 * tune flat_nt_all=1 (forced on), tune flat_nt=0 (off) and neither (the default rule:
 * 16-lane vectors, i.e. a whole cache line per store, and outputs of at least 16 MB for the
 * batch), for the host and
 * for AVX2 (x86-64-v3): the LLVM IR has !nontemporal stores exactly when the rule says so;
 * every output matches the interpreter with 1, 2 and 3 threads (bitwise equal between them),
 * with the output buffer 64-byte aligned (the vmovntps path) and 16 bytes off (the tile's
 * run-time alignment check takes the plain stores), and the builds are bitwise equal to each
 * other (a store hint changes no value).  Cases: odd Cout (a leftover channel tile), planes
 * of whole vectors and not (the latter never take the route), a masked plane tail, a short
 * last chunk, batch 1 and 3 (the pixel and the tile thread split). */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

/* gen_conv.c FLAT_NT_MIN_BYTES */
#define NT_MIN_BYTES (16.0 * 1024 * 1024)

typedef struct nt_case { int n, cin, cout, h, w; } nt_case;

static const nt_case cases[] = {
    {3, 48, 70, 16, 16},   /* 256-px planes (whole vectors), 70 = 11*6 + 4 on 16 lanes */
    {1, 96, 29, 33, 32},   /* 1056-px plane: a short last chunk; batch 1: the tile split */
    {2, 40, 13, 13, 13},   /* 169-px plane: not whole vectors, never non-temporal */
    {2, 16, 65, 180, 180}, /* 16.8 MB of output: the default rule takes it on 16 lanes */
};

/* Whether g's LLVM IR for t has a non-temporal store; -1 when it does not compile. */
static int has_nt(ir_graph *g, const cg_target *t) {
  cgt_ir ir;
  int found = cgt_ir_open(&ir, g, t, "flat_nt");
  while (cgt_ir_next(&ir)) found |= strstr(ir.line, "store ") && strstr(ir.line, "!nontemporal") != NULL;
  return found;
}

static void run_case(const nt_case *k, const cg_target *t, const char *pfx) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d", pfx, k->n, k->cin, k->cout, k->h, k->w);
  /* relu(bn(conv a(x)) + conv b(x)): a's kernel has the add and the relu fused and writes the output */
  ir_graph *g = cgt_flat_graph(k->n, k->cin, k->cout, k->h, k->w, 1, 1, 1);
  cgt_random_params(g, 0.5f);
  int64_t plane = (int64_t)k->h * k->w;
  int whole = plane % t->vec_f32 == 0, line = t->vec_f32 * 4 >= 64;
  cgt_ref r = cgt_ref_make(g);
  size_t ybytes = (size_t)r.ny * sizeof(float);
  float *got[3];
  const char *tune[3] = {"flat_nt_all=1", "flat_nt=0", NULL};
  int want[3] = {whole, 0, whole && line && 4.0 * (double)r.ny >= NT_MIN_BYTES}, ok[3];
  for (int i = 0; i < 3; i++) { /* the knob (NULL: the defaults); the IR's stores; runs, the output 16 B off too */
    char l[200];
    snprintf(l, sizeof l, "%s %s", label, tune[i] ? tune[i] : "default");
    got[i] = malloc(ybytes);
    if (tune[i]) ct_tune(tune[i]);
    int nt = has_nt(g, t);
    CGT_CHECK(nt == want[i], "%s: non-temporal stores in the IR: %d, want %d", l, nt, want[i]);
    ok[i] = flat_build_run(g, t, l, "flat_nt_all=0,flat_nt=1", 1, NULL, 3, 16, &r, got[i]) == 0;
  }
  for (int i = 1; i < 3; i++)
    if (ok[0] && ok[i]) CGT_CHECK(!memcmp(got[0], got[i], ybytes), "%s: builds %d and 0 differ", label, i);
  cgt_ref_free(g, &r);
  for (int i = 0; i < 3; i++) free(got[i]);
  ir_graph_free(g);
}

static void run_one(size_t i, const cg_target *t, const char *name) { run_case(&cases[i], t, name); }

int main(void) { return cgt_sweep_main("test_codegen_flat_nt", sizeof cases / sizeof *cases, run_one); }
