/* cg_share.c — one body per distinct kernel of a compile unit.  Generators bake their packed
 * weights into the code as constant blobs; while a kernel is generated its blobs are
 * placeholders, then the kernel becomes a body taking the blobs as one extra pointer argument
 * (a 64-byte aligned GEP per blob in the entry block), keyed by its IR text.  Nodes whose
 * bodies are equal call one body through per-node wrappers (cg_internal.h, docs/codegen.md
 * "Compile time").  Also cg_blob_const / cg_param_const (cg.h), the generators' constants. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"

typedef struct share_blob {
  size_t off, bytes;
  LLVMValueRef ph, dummy; /* placeholder: the argument of a declared-only function */
} share_blob;

typedef struct share_member {
  char name[256];
  LLVMValueRef blob; /* the node's constants (private global), NULL without blobs */
} share_member;

typedef struct share_body {
  uint64_t hash;
  char *text;        /* the key: IR text of the body (LLVMDisposeMessage) + blob sizes */
  LLVMValueRef fn;   /* with the constants argument last when has_blobs */
  int has_blobs, n_m, cap_m;
  share_member *m;
} share_body;

struct cg_share {
  int rec;                        /* recording a kernel's blobs */
  unsigned char *buf;             /* this kernel's blobs, each at a 64-byte aligned offset */
  size_t len, cap;
  share_blob *b;
  int nb, cap_b;
  int *pv, np, cap_p;             /* this kernel's params (cg_param_const cache) */
  LLVMValueRef *pval;
  share_body *body;
  int n_body, cap_body, n_kernels, n_private;
};

#define GROW(p, n, cap) \
  do { \
    if ((n) >= (cap)) { \
      (cap) = (cap) ? 2 * (cap) : 16; \
      void *q_ = realloc((p), (size_t)(cap) * sizeof *(p)); \
      if (!q_) abort(); \
      (p) = q_; \
    } \
  } while (0)

cg_share *cg_share_new(const ir_tuning *t) {
  if (!t->kernel_share) return NULL;
  cg_share *s = calloc(1, sizeof *s);
  if (!s) abort();
  return s;
}

void cg_share_begin(cg_share *s) {
  s->rec = 1;
  s->len = 0, s->nb = 0, s->np = 0;
}

LLVMValueRef cg_share_blob(cg_ctx *c, cg_share *s, const void *data, size_t bytes) {
  if (!s->rec) return NULL;
  size_t off = (s->len + 63) & ~(size_t)63;
  if (off + bytes > s->cap) {
    s->cap = (off + bytes) * 2 + 4096;
    if (!(s->buf = realloc(s->buf, s->cap))) abort();
  }
  memset(s->buf + s->len, 0, off - s->len);
  memcpy(s->buf + off, data, bytes);
  s->len = off + bytes;
  GROW(s->b, s->nb, s->cap_b);
  LLVMValueRef dummy = LLVMAddFunction(c->mod, "cnnc.blob.ph", LLVMFunctionType(c->t_void, &c->t_ptr, 1, 0));
  s->b[s->nb] = (share_blob){off, bytes, LLVMGetParam(dummy, 0), dummy};
  return s->b[s->nb++].ph;
}

LLVMValueRef *cg_share_param_slot(cg_share *s, int vid) {
  if (!s->rec) return NULL;
  for (int i = 0; i < s->np; i++)
    if (s->pv[i] == vid) return &s->pval[i];
  int cap = s->cap_p;
  GROW(s->pv, s->np, s->cap_p);
  if (cap != s->cap_p && !(s->pval = realloc(s->pval, (size_t)s->cap_p * sizeof *s->pval))) abort();
  s->pv[s->np] = vid, s->pval[s->np] = NULL;
  return &s->pval[s->np++];
}

static void copy_attrs(LLVMValueRef from, LLVMValueRef to, LLVMAttributeIndex i) {
  unsigned n = LLVMGetAttributeCountAtIndex(from, i);
  if (!n) return;
  LLVMAttributeRef a[n];
  LLVMGetAttributesAtIndex(from, i, a);
  for (unsigned j = 0; j < n; j++) LLVMAddAttributeAtIndex(to, i, a[j]);
}

/* Moves from's blocks into a new function of type ty named name (from's parameters first; ty
 * has one more, or one fewer whose uses become `dropped`), with from's attributes, linkage
 * and visibility; deletes from. */
static LLVMValueRef move_body(cg_ctx *c, LLVMValueRef from, LLVMTypeRef ty, const char *name, LLVMValueRef dropped) {
  LLVMValueRef to = LLVMAddFunction(c->mod, "", ty);
  unsigned nf = LLVMCountParams(from), nt = LLVMCountParams(to), n = nf < nt ? nf : nt;
  copy_attrs(from, to, LLVMAttributeFunctionIndex);
  for (unsigned i = 0; i < n; i++) {
    copy_attrs(from, to, i + 1);
    LLVMReplaceAllUsesWith(LLVMGetParam(from, i), LLVMGetParam(to, i));
  }
  if (nf > nt) LLVMReplaceAllUsesWith(LLVMGetParam(from, nf - 1), dropped);
  LLVMSetLinkage(to, LLVMGetLinkage(from));
  LLVMSetVisibility(to, LLVMGetVisibility(from));
  LLVMBasicBlockRef bb;
  while ((bb = LLVMGetFirstBasicBlock(from))) {
    LLVMRemoveBasicBlockFromParent(bb);
    LLVMAppendExistingBasicBlock(to, bb);
  }
  LLVMDeleteFunction(from);
  LLVMSetValueName2(to, name, strlen(name));
  return to;
}

/* Every use of every placeholder is an instruction of f (no generator builds helpers). */
static int uses_in(cg_share *s, LLVMValueRef f) {
  for (int i = 0; i < s->nb; i++)
    for (LLVMUseRef u = LLVMGetFirstUse(s->b[i].ph); u; u = LLVMGetNextUse(u)) {
      LLVMValueRef user = LLVMGetUser(u);
      if (!LLVMIsAInstruction(user) || LLVMGetBasicBlockParent(LLVMGetInstructionParent(user)) != f) return 0;
    }
  return 1;
}

/* The placeholders' uses -> base + offset (base: f's constants argument or a global). */
static void fill_blobs(cg_ctx *c, cg_share *s, LLVMValueRef f, LLVMValueRef base) {
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->llc);
  if (f) LLVMPositionBuilderBefore(tb, LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(f)));
  for (int i = 0; i < s->nb; i++) {
    LLVMValueRef off = LLVMConstInt(c->t_i64, s->b[i].off, 0);
    LLVMValueRef p = f ? LLVMBuildInBoundsGEP2(tb, c->t_i8, base, &off, 1, "blob")
                       : LLVMConstInBoundsGEP2(c->t_i8, base, &off, 1);
    LLVMReplaceAllUsesWith(s->b[i].ph, p);
    LLVMDeleteFunction(s->b[i].dummy);
  }
  LLVMDisposeBuilder(tb);
}

static LLVMValueRef blob_global(cg_ctx *c, cg_share *s, const char *name) {
  if (!s->nb) return NULL;
  return cg_blob_global(c, name, s->buf, s->len);
}

static uint64_t fnv1a(const char *t) {
  uint64_t h = 1469598103934665603ull;
  for (; *t; t++) h = (h ^ (unsigned char)*t) * 1099511628211ull;
  return h;
}

/* IR text of body fn (under a fixed name) followed by the blob sizes. */
static char *body_key(cg_share *s, LLVMValueRef fn) {
  LLVMSetValueName2(fn, "cnnk.key", 8);
  char *ir = LLVMPrintValueToString(fn);
  size_t n = strlen(ir), cap = n + 24 * (size_t)s->nb + 1;
  char *t = malloc(cap);
  if (!t) abort();
  memcpy(t, ir, n + 1);
  LLVMDisposeMessage(ir);
  for (int i = 0; i < s->nb; i++) n += (size_t)snprintf(t + n, cap - n, " %zu", s->b[i].bytes);
  /* The printed text names the function's attribute group only (#N), and string attributes
   * (target-features, cnnc-* markers) are not in its comment: append them all. */
  unsigned na = LLVMGetAttributeCountAtIndex(fn, LLVMAttributeFunctionIndex);
  if (na) {
    LLVMAttributeRef *at = malloc(na * sizeof *at);
    if (!at) abort();
    LLVMGetAttributesAtIndex(fn, LLVMAttributeFunctionIndex, at);
    for (unsigned i = 0; i < na; i++) {
      char buf[64];
      const char *k, *v;
      unsigned kl = 0, vl = 0;
      if (LLVMIsStringAttribute(at[i])) {
        k = LLVMGetStringAttributeKind(at[i], &kl), v = LLVMGetStringAttributeValue(at[i], &vl);
      } else {
        snprintf(buf, sizeof buf, "%u:%llu", LLVMGetEnumAttributeKind(at[i]),
                 LLVMIsEnumAttribute(at[i]) ? (unsigned long long)LLVMGetEnumAttributeValue(at[i]) : 0ull);
        k = buf, kl = (unsigned)strlen(buf), v = "", vl = 0;
      }
      size_t need = n + kl + vl + 4;
      if (need > cap) {
        cap = 2 * need;
        t = realloc(t, cap);
        if (!t) abort();
      }
      n += (size_t)snprintf(t + n, cap - n, " %.*s=%.*s", (int)kl, k, (int)vl, v);
    }
    free(at);
  }
  return t;
}

void cg_share_end(cg_ctx *c, cg_share *s, LLVMValueRef f, const char *name) {
  s->rec = 0;
  s->n_kernels++;
  char bname[300];
  snprintf(bname, sizeof bname, "cnnb.%s", name);
  LLVMValueRef fn = f;
  if (s->nb && !uses_in(s, f)) { /* not a plain kernel: its own constants, no sharing */
    fill_blobs(c, s, NULL, blob_global(c, s, bname));
    LLVMSetValueName2(f, name, strlen(name));
    s->n_private++;
    return;
  }
  if (s->nb) { /* the body takes the constants last: noalias readonly, 64-aligned */
    LLVMTypeRef ft = LLVMGlobalGetValueType(f);
    unsigned np = LLVMCountParamTypes(ft);
    LLVMTypeRef p[np + 1];
    LLVMGetParamTypes(ft, p);
    p[np] = c->t_ptr;
    fn = move_body(c, f, LLVMFunctionType(LLVMGetReturnType(ft), p, np + 1, 0), "cnnk.body", NULL);
    LLVMValueRef consts = LLVMGetParam(fn, np);
    LLVMSetValueName2(consts, "consts", 6);
    cg_enum_attr(c, fn, np + 1, "noalias", 0);
    cg_enum_attr(c, fn, np + 1, "readonly", 0);
    cg_enum_attr(c, fn, np + 1, "nocapture", 0);
    cg_enum_attr(c, fn, np + 1, "align", 64);
    cg_enum_attr(c, fn, np + 1, "dereferenceable", s->len);
    fill_blobs(c, s, fn, consts);
  }
  char *key = body_key(s, fn);
  uint64_t h = fnv1a(key);
  share_body *b = NULL;
  for (int i = 0; i < s->n_body && !b; i++)
    if (s->body[i].hash == h && !strcmp(s->body[i].text, key)) b = &s->body[i];
  if (b) {
    free(key);
    LLVMDeleteFunction(fn);
  } else {
    GROW(s->body, s->n_body, s->cap_body);
    b = &s->body[s->n_body++];
    *b = (share_body){h, key, fn, s->nb > 0, 0, 0, NULL};
    char tmp[32];
    snprintf(tmp, sizeof tmp, "cnnk.body.%d", s->n_body);
    LLVMSetValueName2(fn, tmp, strlen(tmp));
  }
  GROW(b->m, b->n_m, b->cap_m);
  share_member *m = &b->m[b->n_m++];
  snprintf(m->name, sizeof m->name, "%s", name);
  m->blob = blob_global(c, s, bname);
}

/* void name(args...) { tail call body(args..., blob) } */
static void wrapper(cg_ctx *c, const share_body *b, const share_member *m) {
  LLVMTypeRef bt = LLVMGlobalGetValueType(b->fn);
  unsigned np = LLVMCountParamTypes(bt) - 1;
  LLVMTypeRef p[np + 1];
  LLVMGetParamTypes(bt, p);
  LLVMValueRef w = LLVMAddFunction(c->mod, m->name, LLVMFunctionType(c->t_void, p, np, 0));
  LLVMSetVisibility(w, LLVMHiddenVisibility);
  cg_set_fn_attrs(c, w);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, w, "entry"));
  LLVMValueRef a[np + 1];
  for (unsigned i = 0; i < np; i++) a[i] = LLVMGetParam(w, i);
  a[np] = m->blob;
  LLVMSetTailCall(LLVMBuildCall2(c->b, bt, b->fn, a, np + 1, ""), 1);
  LLVMBuildRetVoid(c->b);
}

void cg_share_finish(cg_ctx *c, cg_share *s, int *n_kernels, int *n_bodies) {
  if (!s) return;
  *n_kernels += s->n_kernels, *n_bodies += s->n_body + s->n_private;
  for (int i = 0; i < s->n_body; i++) {
    share_body *b = &s->body[i];
    if (b->n_m == 1 && b->has_blobs) { /* unshared: the constants are its own global again */
      LLVMTypeRef ft = LLVMGlobalGetValueType(b->fn);
      unsigned np = LLVMCountParamTypes(ft) - 1;
      LLVMTypeRef p[np + 1];
      LLVMGetParamTypes(ft, p);
      move_body(c, b->fn, LLVMFunctionType(LLVMGetReturnType(ft), p, np, 0), b->m[0].name, b->m[0].blob);
    } else if (!b->has_blobs) { /* the first node's kernel; the others alias it */
      LLVMSetValueName2(b->fn, b->m[0].name, strlen(b->m[0].name));
      for (int j = 1; j < b->n_m; j++) {
        LLVMValueRef a = LLVMAddAlias2(c->mod, LLVMGlobalGetValueType(b->fn), 0, b->fn, b->m[j].name);
        LLVMSetVisibility(a, LLVMHiddenVisibility);
      }
    } else { /* shared: named after its first node; every node calls it with its own blob */
      char nm[300];
      snprintf(nm, sizeof nm, "%s_shared", b->m[0].name);
      LLVMSetValueName2(b->fn, nm, strlen(nm));
      cg_enum_attr(c, b->fn, LLVMAttributeFunctionIndex, "noinline", 0);
      for (int j = 0; j < b->n_m; j++) wrapper(c, b, &b->m[j]);
    }
    free(b->text);
    free(b->m);
  }
  free(s->body);
  free(s->buf);
  free(s->b);
  free(s->pv);
  free(s->pval);
  free(s);
}

/* ---- constants of a kernel (cg.h cg_blob_const / cg_param_const): private globals, or while
 * recording the placeholders above ------------------------------------------------------- */
LLVMValueRef cg_blob_global(cg_ctx *c, const char *name, const void *data, size_t bytes) {
  LLVMValueRef init = cg_plan_only(c) ? LLVMConstNull(LLVMArrayType2(LLVMInt8TypeInContext(c->llc), bytes))
                                      : LLVMConstStringInContext2(c->llc, data, bytes, 1);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  LLVMSetAlignment(g, 64);
  return g;
}

LLVMValueRef cg_blob_const(cg_ctx *c, const char *name, const void *data, size_t bytes) {
  cg_priv *p = c->priv;
  LLVMValueRef ph = p && p->share ? cg_share_blob(c, p->share, data, bytes) : NULL;
  if (ph) return ph; /* a kernel argument's offset, filled by cg_share_end */
  return cg_blob_global(c, name, data, bytes);
}

LLVMValueRef cg_param_const(cg_ctx *c, int vid) {
  cg_priv *p = c->priv;
  LLVMValueRef *slot = p->share ? cg_share_param_slot(p->share, vid) : NULL; /* per kernel when shared */
  if (!slot) slot = &p->param_global[vid];
  if (*slot) return *slot;
  const ir_value *v = &c->g->values[vid];
  if (p->train) {
    cg_fail(c, NULL, "internal error: param '%s' read as a constant in a training kernel", v->name);
    return LLVMConstNull(c->t_ptr);
  }
  char name[300];
  snprintf(name, sizeof name, "p.%s", v->name);
  *slot = cg_blob_const(c, name, v->data, (size_t)ir_shape_numel(&v->shape) * sizeof(float));
  return *slot;
}
