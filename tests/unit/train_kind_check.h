/* train_kind_check.h — has_kinds / lacks_kind: compile a training model and check which kernel
 * kinds its .so names; shared by the training codegen tests that include it after
 * train_case_check.h. */
#ifndef TRAIN_KIND_CHECK_H
#define TRAIN_KIND_CHECK_H

#include "ct_tune.h"

/* Compiles yml for training and checks that the .so names every kernel kind in want (present)
 * or none of them (!present); the descriptor holds each kernel's kind string. */
static int check_kinds(const char *name, const char *yml, const char *const *want, int n_want, int present) {
  char path[512], so[512];
  snprintf(path, sizeof path, "%s/%s_k.yml", cgt_dir, name);
  snprintf(so, sizeof so, "%s/%s_k.so", cgt_dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(yml, f) < 0 || fclose(f)) return 1;
  fe_options o;
  ir_graph *g = load_case(path, 2, &o);
  ir_diag d = {0};
  int bad = !g || cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d);
  if (bad) ir_diag_print(&d, stderr);
  char *buf = NULL;
  long len = 0;
  FILE *sf = bad ? NULL : fopen(so, "rb");
  if (sf && !fseek(sf, 0, SEEK_END) && (len = ftell(sf)) > 0 && !fseek(sf, 0, SEEK_SET) && (buf = malloc((size_t)len)) &&
      fread(buf, 1, (size_t)len, sf) == (size_t)len) {
    for (int i = 0; i < n_want; i++) {
      int found = memmem(buf, (size_t)len, want[i], strlen(want[i])) != NULL;
      if (present) CGT_CHECK(found, "%s: no kernel of kind %s", name, want[i]);
      else CGT_CHECK(!found, "%s: a kernel kind with %s", name, want[i]);
      bad += found != present;
    }
  } else {
    bad++;
  }
  if (sf) fclose(sf);
  free(buf);
  if (g) ir_graph_free(g);
  unlink(so), unlink(path);
  return bad;
}

static int has_kinds(const char *name, const char *yml, const char *const *want, int n_want) {
  return check_kinds(name, yml, want, n_want, 1);
}

/* 1 (a failure) when the training .so of yml names a kernel kind containing frag. */
static __attribute__((unused)) int lacks_kind(const char *name, const char *yml, const char *frag) {
  return check_kinds(name, yml, &frag, 1, 0);
}

#endif
