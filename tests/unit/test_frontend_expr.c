/* test_frontend_expr.c — the frontend's small pieces alone: the `=` expression evaluator
 * (values, precedence, floor division, short-circuit, every error kind, depth limit), the
 * "did you mean" suggestions, and the YAML loader's positions and limits. */
#include <stdio.h>
#include <string.h>

#include "frontend/fe_int.h"

#include "check.h"

static const fe_var g_vars[] = {
    {"width", {FE_V_INT, 64, 0}}, {"i", {FE_V_INT, 0, 0}}, {"in_ch", {FE_V_INT, 24, 0}},
    {"ratio", {FE_V_FLOAT, 0, 0.25}}, {"down", {FE_V_BOOL, 1, 0}},
};
static const fe_env g_env = {g_vars, 5, NULL};

static void expect_int(const char *text, int64_t want) {
  fe_value v;
  char err[256];
  int rc = fe_expr_eval(text, &g_env, &v, err, sizeof err);
  CHECK(rc == 0 && v.t == FE_V_INT && v.i == want, "'%s': want int %lld, got rc=%d t=%d i=%lld f=%g err=%s", text,
        (long long)want, rc, v.t, (long long)v.i, v.f, err);
}

static void expect_float(const char *text, double want) {
  fe_value v;
  char err[256];
  int rc = fe_expr_eval(text, &g_env, &v, err, sizeof err);
  CHECK(rc == 0 && v.t == FE_V_FLOAT && v.f == want, "'%s': want float %g, got rc=%d t=%d f=%g err=%s", text, want,
        rc, v.t, v.f, err);
}

static void expect_bool(const char *text, int want) {
  fe_value v;
  char err[256];
  int rc = fe_expr_eval(text, &g_env, &v, err, sizeof err);
  CHECK(rc == 0 && v.t == FE_V_BOOL && v.i == want, "'%s': want bool %d, got rc=%d t=%d i=%lld err=%s", text, want,
        rc, v.t, (long long)v.i, err);
}

static void expect_error(const char *text, const char *fragment) {
  fe_value v;
  char err[256];
  int rc = fe_expr_eval(text, &g_env, &v, err, sizeof err);
  CHECK(rc == -1 && strstr(err, fragment), "'%s': want an error containing '%s', got rc=%d err='%s'", text, fragment,
        rc, err);
}

static void test_values(void) {
  expect_int("1 + 2 * 3", 7);
  expect_int("(1 + 2) * 3", 9);
  expect_int("width * 4", 256);
  expect_int("7 / 2", 3);
  expect_int("-7 / 2", -4);   /* floor division */
  expect_int("-7 % 3", 2);    /* floor modulo */
  expect_int("7 % -3", -2);
  expect_int("--3", 3);
  expect_int("i == 0 ? 2 : 1", 2);
  expect_int("max(1, in_ch / 4)", 6);
  expect_int("min(3, 1, 2)", 1);
  expect_int("round(2.5)", 3);
  expect_int("round(-2.5)", -3);
  expect_int("floor(-0.5)", -1);
  expect_int("ceil(0.1)", 1);
  expect_int("int(-3.9)", -3);
  expect_int("int(width * 1.5)", 96);
  expect_float("width * 1.5", 96.0);
  expect_float("7 / 2.0", 3.5);
  expect_float("ratio * 4", 1.0);
  expect_float("max(1, 2.5)", 2.5);
  expect_float("1e3", 1000.0);
  expect_bool("true", 1);
  expect_bool("!down", 0);
  expect_bool("i == 0 && down", 1);
  expect_bool("width >= 64 || 1 / 0 == 1", 1); /* right side not evaluated */
  expect_bool("false && 1 / 0 == 1", 0);
}

static void test_ternary_laziness(void) {
  expect_int("i == 0 ? 5 : 1 / 0", 5);
  expect_int("i != 0 ? 1 / 0 : 6", 6);
  expect_int("down ? (i == 0 ? 10 : 20) : 30", 10);
}

static void test_errors(void) {
  expect_error("width**2", "expected a value at '*2'");
  expect_error("width +", "expected a value at the end");
  expect_error("(1 + 2", "expected ')'");
  expect_error("true ? 2", "expected ':'");
  expect_error("widht * 2", "unknown name 'widht'");
  expect_error("sqrt(4)", "unknown function 'sqrt'");
  expect_error("max(1)", "two or more arguments");
  expect_error("round(1, 2)", "one argument");
  expect_error("1 / 0", "division by zero");
  expect_error("1 % 0", "division by zero");
  expect_error("1.0 / 0", "division by zero");
  expect_error("9223372036854775807 + 1", "integer overflow");
  expect_error("99999999999999999999", "integer out of range");
  expect_error("down + 1", "needs numbers");
  expect_error("1 && true", "needs bools");
  expect_error("!3", "needs a bool");
  expect_error("width ? 1 : 2", "must be a bool");
  expect_error("true < false", "needs numbers");
  expect_error("true == 1", "cannot compare");
  expect_error("1 2", "unexpected text");
  expect_error("", "expected a value");
  expect_error("a = 1", "unknown name 'a'");
  expect_error("1 = 1", "unexpected text");
  expect_error("1 < 2 == true", "unexpected text"); /* comparisons do not chain */
}

static void test_depth_limit(void) {
  char deep[4096];
  size_t n = 0;
  for (int k = 0; k < 1000; k++) deep[n++] = '(';
  deep[n++] = '1';
  for (int k = 0; k < 1000; k++) deep[n++] = ')';
  deep[n] = 0;
  expect_error(deep, "nested too deeply");
  for (n = 0; n < 2000; n++) deep[n] = '-';
  deep[n++] = '1', deep[n] = 0;
  expect_error(deep, "nested too deeply");
  expect_int("((((((((((1))))))))))", 1);
}

static void test_suggest(void) {
  static const char *const keys[] = {"filters", "kernel", "stride", "padding", "dilation", "groups", "bias"};
  CHECK(fe_closest("filter", keys, 7) && !strcmp(fe_closest("filter", keys, 7), "filters"), "filter -> filters");
  CHECK(fe_closest("kernal", keys, 7) && !strcmp(fe_closest("kernal", keys, 7), "kernel"), "kernal -> kernel");
  CHECK(fe_closest("pad", keys, 7) && !strcmp(fe_closest("pad", keys, 7), "padding"), "pad -> padding");
  CHECK(fe_closest("Stride", keys, 7) && !strcmp(fe_closest("Stride", keys, 7), "stride"), "Stride -> stride");
  CHECK(fe_closest("xyzzy", keys, 7) == NULL, "no suggestion for xyzzy");
}

static void test_yaml(void) {
  ir_arena *a = ir_arena_new();
  ir_diag d = {0};
  const char *text = "name: m\nlayers:\n  - {name: c1, op: conv}\n  - name: 'q'\n";
  const fe_node *r = fe_yaml_parse(a, "t.yml", text, strlen(text), &d);
  CHECK(r && r->kind == FE_N_MAP && r->n == 2, "root mapping with 2 keys");
  const fe_node *layers = fe_map_get(r, "layers");
  CHECK(layers && layers->kind == FE_N_SEQ && layers->n == 2, "layers sequence");
  if (layers && layers->n == 2) {
    const fe_node *op = fe_map_get(layers->kids[0], "op");
    CHECK(op && op->line == 3 && op->col == 20 && !strcmp(op->s, "conv"), "op at 3:20 (got %d:%d)", op ? op->line : 0,
          op ? op->col : 0);
    const fe_node *q = fe_map_get(layers->kids[1], "name");
    CHECK(q && q->quoted && q->line == 4 && q->col == 11, "quoted name at 4:11");
  }
  ir_diag d2 = {0};
  const char *bad = "a: [1, 2\nb: 3\n";
  CHECK(!fe_yaml_parse(a, "bad.yml", bad, strlen(bad), &d2) && d2.failed && d2.loc.line == 2,
        "malformed YAML located on line 2 (got %d: %s)", d2.loc.line, d2.msg);
  ir_diag d3 = {0};
  const char *loop = "a: &x [*x]\n";
  CHECK(!fe_yaml_parse(a, "loop.yml", loop, strlen(loop), &d3) && strstr(d3.msg, "recursive alias"),
        "self-referencing alias is cut off (%s)", d3.msg);
  ir_diag d4 = {0};
  const char *two = "a: 1\n---\nb: 2\n";
  CHECK(!fe_yaml_parse(a, "two.yml", two, strlen(two), &d4) && strstr(d4.msg, "one YAML document"),
        "second document rejected (%s)", d4.msg);
  ir_arena_free(a);
}

int main(void) {
  test_values();
  test_ternary_laziness();
  test_errors();
  test_depth_limit();
  test_suggest();
  test_yaml();
  return check_done("test_frontend_expr", g_failures);
}
