/* suggest.c — "did you mean" for unknown keys, ops, blocks, layer names and flags: the
 * closest candidate by edit distance (Levenshtein, case-insensitive), plus list joining. */
#include <ctype.h>
#include <string.h>

#include "fe_int.h"

/* Edit distance of a and b, capped at 64 characters each (longer tails count as edits). */
static int distance(const char *a, const char *b) {
  int n = (int)strlen(a), m = (int)strlen(b), extra = 0;
  if (n > 64) extra += n - 64, n = 64;
  if (m > 64) extra += m - 64, m = 64;
  int row[65];
  for (int j = 0; j <= m; j++) row[j] = j;
  for (int i = 1; i <= n; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= m; j++) {
      int up = row[j];
      int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      int best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m] + extra;
}

const char *fe_closest(const char *s, const char *const *cand, int n) {
  const char *best = NULL;
  int best_d = 1 << 30;
  int len = (int)strlen(s);
  int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3 + (len > 12);
  for (int i = 0; i < n; i++) {
    if (!cand[i]) continue;
    int d = distance(s, cand[i]);
    /* a candidate that contains s (or the reverse) is a good guess too: "pad" -> "padding" */
    if (d > limit && len >= 3 && (strstr(cand[i], s) || strstr(s, cand[i]))) d = limit;
    if (d < best_d) best_d = d, best = cand[i];
  }
  return best_d <= limit ? best : NULL;
}

const char *fe_did_you_mean(ir_arena *a, const char *s, const char *const *cand, int n) {
  const char *c = fe_closest(s, cand, n);
  return c ? ir_fmt(a, " (did you mean '%s'?)", c) : "";
}

const char *fe_join(ir_arena *a, const char *const *items, int n) {
  size_t len = 1;
  for (int i = 0; i < n; i++) len += strlen(items[i]) + 2;
  char *s = ir_alloc(a, len), *p = s;
  for (int i = 0; i < n; i++) {
    size_t k = strlen(items[i]);
    if (i) memcpy(p, ", ", 2), p += 2;
    memcpy(p, items[i], k);
    p += k;
  }
  *p = 0;
  return s;
}
