/* test_plan_memory.c — the scratch planner (passes/plan_memory.c) on its own, with hand-made
 * usage records: buffers alive at a common step never share bytes, offsets keep their
 * alignment, dead buffers' bytes are reused, the largest buffer is placed first, degenerate
 * inputs (no records, 0-byte buffers, one step), and a brute-force property check over
 * random records (every offset is the lowest free aligned one in the planner's order). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "tests/unit/check.h"

static int time_overlap(const pass_usage *a, const pass_usage *b) {
  return a->first_step <= b->last_step && b->first_step <= a->last_step;
}
static int mem_overlap(int64_t ao, int64_t an, int64_t bo, int64_t bn) { return ao < bo + bn && bo < ao + an; }

/* Pairs alive together must not share a byte (0-byte buffers own none). */
static int count_collisions(const pass_usage *u, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (u[i].bytes > 0 && u[j].bytes > 0 && time_overlap(&u[i], &u[j]) &&
          mem_overlap(u[i].offset, u[i].bytes, u[j].offset, u[j].bytes))
        bad++;
  return bad;
}

/* Largest sum of bytes alive at one step: no plan can be smaller. */
static int64_t live_peak(const pass_usage *u, int n) {
  int64_t peak = 0;
  for (int i = 0; i < n; i++) {
    int64_t at = 0; /* the live sum at u[i].first_step (peaks sit at some record's start) */
    for (int j = 0; j < n; j++)
      if (u[j].first_step <= u[i].first_step && u[i].first_step <= u[j].last_step) at += u[j].bytes;
    if (at > peak) peak = at;
  }
  return peak;
}

static void test_disjoint_lifetimes_reuse(void) {
  /* a chain: each buffer dies when the next but one is born: a and c can share memory */
  pass_usage u[3] = {{0, 1, 1000, 64, -1}, {1, 2, 1000, 64, -1}, {2, 3, 1000, 64, -1}};
  int64_t total = pass_plan_memory(u, 3);
  CHECK(count_collisions(u, 3) == 0, "chain: live buffers overlap");
  CHECK(u[0].offset == u[2].offset, "chain: a (steps 0-1) and c (2-3) should share offset, got %lld and %lld",
        (long long)u[0].offset, (long long)u[2].offset);
  CHECK(total < 3000 && total >= 2000 && total % 64 == 0, "chain: total %lld, want reuse (< 3000, >= 2000)",
        (long long)total);
}

static void test_all_alive_no_reuse(void) {
  pass_usage u[3] = {{0, 5, 100, 16, -1}, {0, 5, 300, 16, -1}, {2, 3, 200, 16, -1}};
  int64_t total = pass_plan_memory(u, 3);
  CHECK(count_collisions(u, 3) == 0, "all alive: overlap");
  CHECK(total >= 600 && total == 640, "all alive at step 2: total %lld, want 600 rounded up to 640", (long long)total);
}

static void test_largest_first(void) {
  /* all alive together: placed by size, largest at 0, then next largest after it; ties by index */
  pass_usage u[4] = {{0, 0, 64, 64, -1}, {0, 0, 4096, 64, -1}, {0, 0, 1024, 64, -1}, {0, 0, 1024, 64, -1}};
  pass_plan_memory(u, 4);
  CHECK(u[1].offset == 0, "largest first: the 4096-byte buffer at %lld, want 0", (long long)u[1].offset);
  CHECK(u[2].offset == 4096 && u[3].offset == 5120, "ties by index: %lld %lld, want 4096 5120",
        (long long)u[2].offset, (long long)u[3].offset);
  CHECK(u[0].offset == 6144, "smallest last: %lld, want 6144", (long long)u[0].offset);
  /* a small early buffer does not push a large later one up: the large one is placed first */
  pass_usage v[2] = {{0, 1, 10, 1, -1}, {1, 2, 1000, 1, -1}};
  int64_t total = pass_plan_memory(v, 2);
  CHECK(v[1].offset == 0 && v[0].offset == 1000 && total == 1024, "large at 0, small after it: %lld %lld total %lld",
        (long long)v[1].offset, (long long)v[0].offset, (long long)total);
}

static void test_alignment(void) {
  pass_usage u[4] = {{0, 3, 3, 1, -1}, {0, 3, 5, 256, -1}, {0, 3, 7, 128, -1}, {0, 3, 1, 4096, -1}};
  pass_plan_memory(u, 4);
  CHECK(count_collisions(u, 4) == 0, "alignment: overlap");
  for (int i = 0; i < 4; i++)
    CHECK(u[i].offset % u[i].align == 0, "record %d: offset %lld not a multiple of %lld", i, (long long)u[i].offset,
          (long long)u[i].align);
  /* align 0 or negative is taken as 1 (and written back) */
  pass_usage z[2] = {{0, 0, 3, 0, -1}, {0, 0, 3, -8, -1}};
  pass_plan_memory(z, 2);
  CHECK(z[0].align == 1 && z[1].align == 1 && count_collisions(z, 2) == 0, "align <= 0 normalised to 1");
}

static void test_degenerate(void) {
  CHECK(pass_plan_memory(NULL, 0) == 0, "no records: arena 0");
  pass_usage zero[3] = {{0, 2, 0, 64, -1}, {0, 2, 0, 64, -1}, {1, 1, 0, 64, -1}};
  CHECK(pass_plan_memory(zero, 3) == 0, "only 0-byte buffers: arena 0");
  pass_usage mix[3] = {{0, 2, 0, 64, -1}, {0, 2, 100, 64, -1}, {0, 2, 0, 64, -1}};
  int64_t t = pass_plan_memory(mix, 3);
  CHECK(t == 128 && mix[1].offset == 0, "0-byte buffers take no space: total %lld", (long long)t);
  for (int i = 0; i < 3; i++) CHECK(mix[i].offset >= 0 && mix[i].offset % 64 == 0, "0-byte record %d offset", i);
  pass_usage one[1] = {{0, 0, 1, 64, -1}};
  CHECK(pass_plan_memory(one, 1) == 64 && one[0].offset == 0, "one 1-byte buffer: 64-byte arena at 0");
  /* one step: everything alive together, the arena is the (aligned) sum */
  pass_usage same[5];
  int64_t sum = 0;
  for (int i = 0; i < 5; i++) same[i] = (pass_usage){7, 7, 64 * (i + 1), 64, -1}, sum += 64 * (i + 1);
  CHECK(pass_plan_memory(same, 5) == sum && count_collisions(same, 5) == 0, "one step: arena = sum");
  /* many steps, one buffer each, nothing overlapping in time: everything at offset 0 */
  pass_usage seq[6];
  for (int i = 0; i < 6; i++) seq[i] = (pass_usage){i, i, 100 + i, 64, -1};
  CHECK(pass_plan_memory(seq, 6) == 128, "disjoint in time: arena = the largest, rounded to 64");
  for (int i = 0; i < 6; i++) CHECK(seq[i].offset == 0, "disjoint: record %d at %lld", i, (long long)seq[i].offset);
}

/* The planner's order: bytes descending, then index. */
static int *plan_order(const pass_usage *u, int n) {
  int *o = malloc((size_t)(n ? n : 1) * sizeof *o);
  if (!o) abort();
  for (int i = 0; i < n; i++) o[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort, stable */
    for (int j = i; j > 0 && u[o[j]].bytes > u[o[j - 1]].bytes; j--) {
      int t = o[j];
      o[j] = o[j - 1], o[j - 1] = t;
    }
  return o;
}

/* The offset of u[o[k]] must be the lowest multiple of its alignment that collides with none
 * of u[o[0..k-1]] alive at an overlapping step. */
static int lowest_free(const pass_usage *u, const int *o, int k) {
  const pass_usage *r = &u[o[k]];
  for (int64_t off = 0; off < r->offset; off += r->align) {
    int free_here = 1;
    for (int i = 0; i < k && free_here; i++) {
      const pass_usage *p = &u[o[i]];
      if (time_overlap(r, p) && p->bytes > 0 && r->bytes > 0 && mem_overlap(off, r->bytes, p->offset, p->bytes))
        free_here = 0;
    }
    if (free_here) return 0;
  }
  return 1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static void test_random_properties(void) {
  static const int64_t aligns[] = {1, 4, 16, 64, 256};
  int trials = 3000, fails = 0, reused = 0;
  for (int t = 0; t < trials && fails < 5; t++) {
    int n = (int)(next() % 14), steps = 1 + (int)(next() % 10);
    pass_usage u[14];
    int64_t sum = 0, max_end = 0;
    for (int i = 0; i < n; i++) {
      int a = (int)(next() % (uint64_t)steps), b = (int)(next() % (uint64_t)steps);
      int64_t bytes = next() % 8 == 0 ? 0 : (int64_t)(next() % 5000);
      u[i] = (pass_usage){a < b ? a : b, a < b ? b : a, bytes, aligns[next() % 5], -1};
      sum += bytes + u[i].align - 1;
    }
    int64_t total = pass_plan_memory(u, n);
    int *o = plan_order(u, n);
    int bad_order = 0;
    for (int k = 0; k < n; k++) bad_order += !lowest_free(u, o, k);
    free(o);
    int bad_align = 0;
    for (int i = 0; i < n; i++) {
      bad_align += u[i].offset < 0 || u[i].offset % u[i].align != 0;
      if (u[i].bytes > 0 && u[i].offset + u[i].bytes > max_end) max_end = u[i].offset + u[i].bytes;
    }
    int64_t plain = 0;
    for (int i = 0; i < n; i++) plain += u[i].bytes;
    int ok = count_collisions(u, n) == 0 && bad_align == 0 && bad_order == 0 && total % 64 == 0 &&
             total >= max_end && total < max_end + 64 && total >= live_peak(u, n) && max_end <= sum;
    if (total < plain) reused++;
    if (!ok) {
      fails++;
      CHECK(0, "random trial %d (n %d, steps %d): collisions %d, bad align %d, not lowest %d, total %lld, end %lld, "
               "peak %lld", t, n, steps, count_collisions(u, n), bad_align, bad_order, (long long)total,
            (long long)max_end, (long long)live_peak(u, n));
    }
  }
  CHECK(reused > trials / 4, "reuse should happen in many random trials (total < sum): %d of %d", reused, trials);
}

int main(void) {
  test_disjoint_lifetimes_reuse();
  test_all_alive_no_reuse();
  test_largest_first();
  test_alignment();
  test_degenerate();
  test_random_properties();
  return check_done("test_plan_memory", g_failures);
}
