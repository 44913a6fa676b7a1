/* cm_span.c — the layout rule of a safetensors data section, for both of its readers (the
 * frontend's weights, the runtime's checkpoints): the tensors' byte ranges, sorted by offset,
 * must follow one another from 0 to the end of the section — no overlap (the same bytes read
 * as two tensors), no gap, nothing after the last. */
#include <stdlib.h>

#include "cm.h"

static int cmp_span(const void *a, const void *b) {
  const cm_span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

cm_tile_fault cm_spans_tile(cm_span *s, int n, uint64_t total, int *at, uint64_t *end) {
  qsort(s, (size_t)(n > 0 ? n : 0), sizeof *s, cmp_span);
  uint64_t reach = 0;
  for (int i = 0; i < n; i++) {
    *at = i, *end = reach;
    if (s[i].begin < reach) return CM_TILE_OVERLAP;
    if (s[i].begin > reach) return CM_TILE_GAP;
    reach = s[i].end;
  }
  *at = n, *end = reach;
  return reach == total ? CM_TILE_OK : CM_TILE_TRAILING;
}
