/* expr.c — the model format's `=...` expressions: ints, floats, bools, visible names
 * (block params, i, in_ch), + - * / % (floor division and modulo on ints), comparisons,
 * && || !, ?:, parentheses and min/max/round/floor/ceil/int.  A recursive-descent evaluator
 * with a depth limit; branches not taken are parsed but not evaluated (no errors from them). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "fe_int.h"

typedef struct ex {
  const char *src, *p;
  const fe_env *env;
  int depth;
  int failed;
  char *err;
  size_t errn;
} ex;

static fe_value vint(int64_t i) { return (fe_value){FE_V_INT, i, 0}; }
static fe_value vbool(int b) { return (fe_value){FE_V_BOOL, b != 0, 0}; }
static fe_value vfloat(double f) { return (fe_value){FE_V_FLOAT, 0, f}; }
static double num(fe_value v) { return v.t == FE_V_FLOAT ? v.f : (double)v.i; }

/* Records the first error; with at, the message shows where in the text it happened. */
static fe_value report(ex *e, int at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static fe_value report(ex *e, int at, const char *fmt, ...) {
  if (e->failed) return vint(0);
  e->failed = 1;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!at) snprintf(e->err, e->errn, "%s", msg);
  else if (*e->p) snprintf(e->err, e->errn, "%s at '%.20s'", msg, e->p);
  else snprintf(e->err, e->errn, "%s at the end", msg);
  return vint(0);
}

/* A syntax error (names the position); an evaluation error (type, overflow, division by zero). */
#define syntax(e, ...) report(e, 1, __VA_ARGS__)
#define fail(e, ...) report(e, 0, __VA_ARGS__)

const char *fe_vtype_name(fe_vtype t) { return t == FE_V_INT ? "int" : t == FE_V_FLOAT ? "float" : "bool"; }

char *fe_value_str(fe_value v, char *buf, size_t n) {
  if (v.t == FE_V_INT) snprintf(buf, n, "%lld", (long long)v.i);
  else if (v.t == FE_V_BOOL) snprintf(buf, n, "%s", v.i ? "true" : "false");
  else snprintf(buf, n, "%.17g", v.f);
  return buf;
}

const fe_value *fe_env_find(const fe_env *env, const char *name) {
  for (; env; env = env->next)
    for (int i = env->n - 1; i >= 0; i--)
      if (strcmp(env->vars[i].name, name) == 0) return &env->vars[i].v;
  return NULL;
}

static void skip_ws(ex *e) {
  while (*e->p == ' ' || *e->p == '\t') e->p++;
}

static int accept(ex *e, const char *tok) {
  skip_ws(e);
  size_t n = strlen(tok);
  if (strncmp(e->p, tok, n) != 0) return 0;
  /* "<" must not match "<=", "=" never stands alone, "!" must not match "!=" */
  if (n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '!') && e->p[1] == '=') return 0;
  e->p += n;
  return 1;
}

static fe_value expr(ex *e, int live);

/* A number token: digits[.digits][(e|E)[+-]digits], read by cm_num_scan as everywhere else. */
static fe_value number(ex *e) {
  const char *s = e->p, *p = s;
  while (isdigit((unsigned char)*p)) p++;
  if (*p == '.')
    for (p++; isdigit((unsigned char)*p);) p++;
  if ((*p == 'e' || *p == 'E') && (isdigit((unsigned char)p[1]) || ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char)p[2]))))
    for (p += 2; isdigit((unsigned char)*p);) p++;
  char tok[64];
  if (p - s >= (long)sizeof tok) return syntax(e, "number too long");
  memcpy(tok, s, (size_t)(p - s));
  tok[p - s] = 0;
  e->p = p;
  cm_num x = cm_num_scan(tok);
  if (x.kind == CM_INT) return vint(x.i);
  if (x.kind == CM_REAL) return vfloat(x.f);
  return syntax(e, x.kind == CM_INT_RANGE ? "integer out of range" : x.kind == CM_REAL_RANGE ? "number out of range" : "bad number");
}

static int is_num(fe_value v) { return v.t != FE_V_BOOL; }

/* min/max/round/floor/ceil/int; args already evaluated. */
static fe_value call(ex *e, const char *fn, fe_value *a, int n, int live) {
  static const char *const fns[] = {"min", "max", "round", "floor", "ceil", "int"};
  int k = 0;
  while (k < 6 && strcmp(fn, fns[k])) k++;
  if (k == 6) return syntax(e, "unknown function '%s'", fn);
  if (k < 2 ? n < 2 : n != 1) return fail(e, "%s() takes %s", fn, k < 2 ? "two or more arguments" : "one argument");
  if (!live) return vint(0);
  for (int i = 0; i < n; i++)
    if (!is_num(a[i])) return fail(e, "%s() needs numbers, got a bool", fn);
  if (k < 2) {
    fe_value r = a[0];
    for (int i = 1; i < n; i++) {
      int take = k == 0 ? num(a[i]) < num(r) : num(a[i]) > num(r);
      if (a[i].t == FE_V_INT && r.t == FE_V_INT) r = take ? a[i] : r;
      else r = vfloat(take ? num(a[i]) : num(r));
    }
    return r;
  }
  if (a[0].t == FE_V_INT) return a[0];
  double x = a[0].f, y = k == 2 ? round(x) : k == 3 ? floor(x) : k == 4 ? ceil(x) : trunc(x);
  if (!(fabs(y) < 9.2e18)) return fail(e, "%s() result out of the int range", fn);
  return vint((int64_t)y);
}

static fe_value name_or_call(ex *e, int live) {
  const char *s = e->p;
  while (isalnum((unsigned char)*e->p) || *e->p == '_') e->p++;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(e->p - s), s);
  if (!strcmp(name, "true")) return vbool(1);
  if (!strcmp(name, "false")) return vbool(0);
  if (accept(e, "(")) {
    fe_value a[8];
    int n = 0;
    if (!accept(e, ")")) {
      do {
        fe_value v = expr(e, live);
        if (n < 8) a[n] = v;
        n++;
      } while (!e->failed && accept(e, ","));
      if (!e->failed && !accept(e, ")")) return syntax(e, "expected ')' after the arguments of %s()", name);
    }
    if (e->failed) return vint(0);
    if (n > 8) return fail(e, "too many arguments to %s()", name);
    return call(e, name, a, n, live);
  }
  const fe_value *v = fe_env_find(e->env, name);
  if (!v) {
    e->p = s;
    return syntax(e, "unknown name '%s'", name);
  }
  return *v;
}

static fe_value primary(ex *e, int live) {
  skip_ws(e);
  if (isdigit((unsigned char)*e->p) || (*e->p == '.' && isdigit((unsigned char)e->p[1]))) return number(e);
  if (isalpha((unsigned char)*e->p) || *e->p == '_') return name_or_call(e, live);
  if (accept(e, "(")) {
    fe_value v = expr(e, live);
    if (!e->failed && !accept(e, ")")) return syntax(e, "expected ')'");
    return v;
  }
  return syntax(e, "expected a value");
}

static fe_value unary(ex *e, int live) {
  if (++e->depth > FE_MAX_EXPR_DEPTH) return syntax(e, "expression nested too deeply");
  fe_value v;
  if (accept(e, "-") || accept(e, "+")) {
    int neg = e->p[-1] == '-';
    v = unary(e, live);
    if (live && !e->failed) {
      if (!is_num(v)) v = fail(e, "unary %c needs a number, got a bool", neg ? '-' : '+');
      else if (neg && v.t == FE_V_INT) v = v.i == INT64_MIN ? fail(e, "integer overflow") : vint(-v.i);
      else if (neg) v = vfloat(-v.f);
    }
  } else if (accept(e, "!")) {
    v = unary(e, live);
    if (live && !e->failed) v = v.t == FE_V_BOOL ? vbool(!v.i) : fail(e, "'!' needs a bool, got %s", fe_vtype_name(v.t));
  } else {
    v = primary(e, live);
  }
  e->depth--;
  return v;
}

static int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
static int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

static fe_value arith(ex *e, char op, fe_value a, fe_value b) {
  if (!is_num(a) || !is_num(b)) return fail(e, "'%c' needs numbers, got a bool", op);
  if (a.t == FE_V_INT && b.t == FE_V_INT) {
    int64_t r = 0;
    int ovf = 0;
    if (op == '+') ovf = __builtin_add_overflow(a.i, b.i, &r);
    else if (op == '-') ovf = __builtin_sub_overflow(a.i, b.i, &r);
    else if (op == '*') ovf = __builtin_mul_overflow(a.i, b.i, &r);
    else if (b.i == 0) return fail(e, "division by zero");
    else if (a.i == INT64_MIN && b.i == -1) ovf = 1;
    else r = op == '/' ? floordiv(a.i, b.i) : floormod(a.i, b.i);
    return ovf ? fail(e, "integer overflow") : vint(r);
  }
  double x = num(a), y = num(b), r;
  if ((op == '/' || op == '%') && y == 0) return fail(e, "division by zero");
  r = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : op == '/' ? x / y : x - floor(x / y) * y;
  if (!isfinite(r)) return fail(e, "float overflow");
  return vfloat(r);
}

static fe_value mul(ex *e, int live) {
  fe_value v = unary(e, live);
  for (;;) {
    char op = accept(e, "*") ? '*' : accept(e, "/") ? '/' : accept(e, "%") ? '%' : 0;
    if (!op || e->failed) return v;
    fe_value w = unary(e, live);
    if (live && !e->failed) v = arith(e, op, v, w);
  }
}

static fe_value add(ex *e, int live) {
  fe_value v = mul(e, live);
  for (;;) {
    char op = accept(e, "+") ? '+' : accept(e, "-") ? '-' : 0;
    if (!op || e->failed) return v;
    fe_value w = mul(e, live);
    if (live && !e->failed) v = arith(e, op, v, w);
  }
}

static fe_value cmp(ex *e, int live) {
  static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
  fe_value a = add(e, live);
  int k = 0;
  while (k < 6 && !accept(e, ops[k])) k++;
  if (k == 6 || e->failed) return a;
  fe_value b = add(e, live);
  if (!live || e->failed) return vbool(0);
  if ((a.t == FE_V_BOOL) != (b.t == FE_V_BOOL)) return fail(e, "cannot compare a bool with a number");
  if (a.t == FE_V_BOOL && k >= 2) return fail(e, "'%s' needs numbers, got bools", ops[k]);
  double x = num(a), y = num(b);
  int r = (a.t != FE_V_FLOAT && b.t != FE_V_FLOAT) ? (a.i > b.i) - (a.i < b.i) : (x > y) - (x < y);
  return vbool(k == 0 ? r == 0 : k == 1 ? r != 0 : k == 2 ? r <= 0 : k == 3 ? r >= 0 : k == 4 ? r < 0 : r > 0);
}

/* && and || short-circuit: the right side is parsed but evaluated only when needed. */
static fe_value logic(ex *e, int live, int is_or) {
  fe_value v = is_or ? logic(e, live, 0) : cmp(e, live);
  while (!e->failed && accept(e, is_or ? "||" : "&&")) {
    if (live && v.t != FE_V_BOOL) return fail(e, "'%s' needs bools, got %s", is_or ? "||" : "&&", fe_vtype_name(v.t));
    int need = live && (is_or ? !v.i : v.i);
    fe_value w = is_or ? logic(e, need, 0) : cmp(e, need);
    if (need && !e->failed) v = w.t == FE_V_BOOL ? w : fail(e, "'%s' needs bools, got %s", is_or ? "||" : "&&", fe_vtype_name(w.t));
  }
  return v;
}

static fe_value expr(ex *e, int live) {
  if (++e->depth > FE_MAX_EXPR_DEPTH) return syntax(e, "expression nested too deeply");
  fe_value c = logic(e, live, 1);
  if (!e->failed && accept(e, "?")) {
    if (live && c.t != FE_V_BOOL) {
      fail(e, "the condition of '?:' must be a bool, got %s", fe_vtype_name(c.t));
    } else {
      fe_value a = expr(e, live && c.i);
      if (!e->failed && !accept(e, ":")) syntax(e, "expected ':'");
      fe_value b = e->failed ? a : expr(e, live && !c.i);
      c = live && c.i ? a : b;
    }
  }
  e->depth--;
  return c;
}

int fe_expr_eval(const char *text, const fe_env *env, fe_value *out, char *err, size_t errn) {
  ex e = {text, text, env, 0, 0, err, errn};
  if (errn) err[0] = 0;
  *out = expr(&e, 1);
  skip_ws(&e);
  if (!e.failed && *e.p) syntax(&e, "unexpected text");
  return e.failed ? -1 : 0;
}
