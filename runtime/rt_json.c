/* rt_json.c — a growable string with JSON writing helpers, and a strict JSON validator
 * (RFC 8259, nesting limited) used to check the options JSON a model carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static int rt_str_reserve(rt_str *b, size_t extra) {
  if (b->oom) return -1;
  if (b->n + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->oom = 1;
    return -1;
  }
  b->s = s;
  b->cap = cap;
  return 0;
}

void rt_str_printf(rt_str *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (len < 0 || rt_str_reserve(b, (size_t)len) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)len + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)len;
}

void rt_str_json_string(rt_str *b, const char *s) {
  if (!s) {
    rt_str_printf(b, "null");
    return;
  }
  rt_str_printf(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') rt_str_printf(b, "\\%c", *p);
    else if (*p == '\n') rt_str_printf(b, "\\n");
    else if (*p == '\t') rt_str_printf(b, "\\t");
    else if (*p < 0x20) rt_str_printf(b, "\\u%04x", *p);
    else rt_str_printf(b, "%c", *p);
  }
  rt_str_printf(b, "\"");
}

/* ---- validator ---------------------------------------------------------------------- */
typedef struct rt_jp { const char *p; int depth; } rt_jp;

static int rt_jvalue(rt_jp *j);

static void rt_jws(rt_jp *j) {
  while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static int rt_jhex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int rt_jstring(rt_jp *j) {
  if (*j->p != '"') return 0;
  for (j->p++; *j->p != '"'; j->p++) {
    unsigned char c = (unsigned char)*j->p;
    if (c < 0x20) return 0; /* includes the terminating NUL */
    if (c != '\\') continue;
    c = (unsigned char)*++j->p;
    if (c == 'u') {
      for (int k = 1; k <= 4; k++)
        if (!rt_jhex(j->p[k])) return 0;
      j->p += 4;
    } else if (!strchr("\"\\/bfnrt", c) || c == '\0') {
      return 0;
    }
  }
  j->p++;
  return 1;
}

static int rt_jdigits(rt_jp *j) {
  const char *s = j->p;
  while (*j->p >= '0' && *j->p <= '9') j->p++;
  return j->p > s;
}

static int rt_jnumber(rt_jp *j) {
  if (*j->p == '-') j->p++;
  if (*j->p == '0') j->p++;
  else if (!rt_jdigits(j)) return 0;
  if (*j->p == '.') {
    j->p++;
    if (!rt_jdigits(j)) return 0;
  }
  if (*j->p == 'e' || *j->p == 'E') {
    j->p++;
    if (*j->p == '+' || *j->p == '-') j->p++;
    if (!rt_jdigits(j)) return 0;
  }
  return 1;
}

/* Elements of an array (close ']') or members of an object (close '}'). */
static int rt_jcontainer(rt_jp *j, char close) {
  if (++j->depth > 64) return 0;
  j->p++;
  rt_jws(j);
  if (*j->p == close) {
    j->p++;
    j->depth--;
    return 1;
  }
  for (;;) {
    rt_jws(j);
    if (close == '}') {
      if (!rt_jstring(j)) return 0;
      rt_jws(j);
      if (*j->p++ != ':') return 0;
    }
    if (!rt_jvalue(j)) return 0;
    rt_jws(j);
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p++ != close) return 0;
    j->depth--;
    return 1;
  }
}

static int rt_jliteral(rt_jp *j, const char *word) {
  size_t n = strlen(word);
  if (strncmp(j->p, word, n) != 0) return 0;
  j->p += n;
  return 1;
}

static int rt_jvalue(rt_jp *j) {
  rt_jws(j);
  switch (*j->p) {
  case '{': return rt_jcontainer(j, '}');
  case '[': return rt_jcontainer(j, ']');
  case '"': return rt_jstring(j);
  case 't': return rt_jliteral(j, "true");
  case 'f': return rt_jliteral(j, "false");
  case 'n': return rt_jliteral(j, "null");
  default: return rt_jnumber(j);
  }
}

int rt_json_valid(const char *text, int want_object) {
  if (!text) return 0;
  rt_jp j = {text, 0};
  rt_jws(&j);
  if (want_object && *j.p != '{') return 0;
  if (!rt_jvalue(&j)) return 0;
  rt_jws(&j);
  return *j.p == '\0';
}
