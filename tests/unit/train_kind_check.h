/* train_kind_check.h — has_kinds / lacks_kind: compile a training model and check which kernel
 * kinds its .so names; included by train_case_check.h. */
#ifndef TRAIN_KIND_CHECK_H
#define TRAIN_KIND_CHECK_H

#include "ct_tune.h"

/* Compiles yml for training and checks that the .so names every kernel kind in want (present)
 * or none of them (!present); the descriptor holds each kernel's kind string. */
static inline int check_kinds(const char *name, const char *yml, const char *const *want, int n_want, int present) {
  char nm[128], so[512];
  snprintf(nm, sizeof nm, "%s_k", name);
  snprintf(so, sizeof so, "%s/%s.so", cgt_dir, nm);
  long len = 0;
  int bad = tcc_build(nm, yml, 2, NULL, so);
  char *buf = bad ? NULL : cgt_read_file(so, &len);
  for (int i = 0; buf && i < n_want; i++) {
    int found = memmem(buf, (size_t)len, want[i], strlen(want[i])) != NULL;
    if (present) CGT_CHECK(found, "%s: no kernel of kind %s", name, want[i]);
    else CGT_CHECK(!found, "%s: a kernel kind with %s", name, want[i]);
    bad += found != present;
  }
  bad += !buf;
  free(buf);
  unlink(so);
  return bad;
}

static inline int has_kinds(const char *name, const char *yml, const char *const *want, int n_want) {
  return check_kinds(name, yml, want, n_want, 1);
}

/* 1 (a failure) when the training .so of yml names a kernel kind containing frag. */
static inline int lacks_kind(const char *name, const char *yml, const char *frag) {
  return check_kinds(name, yml, &frag, 1, 0);
}

#endif
