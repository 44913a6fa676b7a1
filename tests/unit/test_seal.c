/* test_seal.c — runtime/cnnc_seal.h, the checksum note of a model .so: XXH64 against the
 * reference values (the empty input, "a", "abc", and python-xxhash's documented example,
 * which runs the 32-byte stripe loop), the hash field read as zero wherever it falls
 * (against an explicit zeroing, every size and offset up to 300 bytes), and the note
 * lookup and sealing on a minimal ELF image: found, sealed, verified, and not found once
 * its name, its type or its program header is damaged. */
#include <string.h>

#include "check.h"
#include "runtime/cnnc_seal.h"

static void test_vectors(void) {
  static const struct { const char *s; uint64_t h; } v[] = {
      {"", 0xEF46DB3751D8E999ull},
      {"a", 0xD24EC4F1A98C6E5Bull},
      {"abc", 0x44BC2CF5AD770999ull},
      {"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1ull},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    uint64_t h = cnnc_seal_hash((const unsigned char *)v[i].s, strlen(v[i].s), (size_t)-1);
    CHECK(h == v[i].h, "XXH64(\"%s\") = %016llx, want %016llx", v[i].s, (unsigned long long)h, (unsigned long long)v[i].h);
  }
}

static void test_hole(void) {
  unsigned char b[300], c[300];
  int bad = 0, differ = 0;
  for (int i = 0; i < 300; i++) b[i] = (unsigned char)(i * 7 + 1);
  for (size_t n = 0; n < 300; n++)
    for (size_t h = 0; h < n + 40; h++) {
      memcpy(c, b, sizeof c);
      for (size_t k = h; k < h + 8 && k < n; k++) c[k] = 0;
      uint64_t with_hole = cnnc_seal_hash(b, n, h);
      bad += with_hole != cnnc_seal_hash(c, n, (size_t)-1);
      differ += h + 8 <= n && with_hole != cnnc_seal_hash(b, n, (size_t)-1);
    }
  CHECK(bad == 0, "%d (size, hole) pairs hash differently from the explicitly zeroed bytes", bad);
  CHECK(differ > 1000, "the hole changes the hash in only %d cases", differ);
}

/* A 64-byte ELF64 header, one PT_NOTE program header, the note: enough for cnnc_seal_find. */
static size_t image(unsigned char *p, size_t cap) {
  memset(p, 0, cap);
  memcpy(p, "\177ELF\2\1\1", 7);
  p[32] = 64;           /* e_phoff */
  p[54] = 56, p[56] = 1; /* e_phentsize, e_phnum */
  unsigned char *ph = p + 64;
  ph[0] = 4;             /* PT_NOTE */
  ph[8] = 120;           /* p_offset */
  ph[32] = CNNC_SEAL_NOTE_BYTES, ph[40] = CNNC_SEAL_NOTE_BYTES; /* p_filesz, p_memsz */
  ph[48] = 4;            /* p_align */
  cnnc_seal_template(p + 120);
  return 120 + CNNC_SEAL_NOTE_BYTES + 16;
}

static void test_note(void) {
  unsigned char p[256];
  size_t n = image(p, sizeof p);
  size_t desc = cnnc_seal_find(p, n);
  CHECK(desc == 120 + 20, "note descriptor at %zu, want 140", desc);
  if (desc != 140) return;
  CHECK(cnnc_seal_le32(p + desc) == CNNC_SEAL_VERSION, "template version");
  cnnc_seal_write(p, n, desc);
  CHECK(cnnc_seal_le64(p + desc + 8) == n, "sealed size %llu, want %zu", (unsigned long long)cnnc_seal_le64(p + desc + 8), n);
  uint64_t stored = cnnc_seal_le64(p + desc + CNNC_SEAL_HASH_AT);
  CHECK(stored == cnnc_seal_hash(p, n, desc + CNNC_SEAL_HASH_AT), "the stored hash verifies");
  p[n - 1] ^= 1;
  CHECK(stored != cnnc_seal_hash(p, n, desc + CNNC_SEAL_HASH_AT), "a flipped byte changes the hash");
  unsigned char q[256];
  memcpy(q, p, sizeof q);
  q[120 + 12] = 'C'; /* the name */
  CHECK(cnnc_seal_find(q, n) == 0, "a note named Cnnc is not the seal");
  memcpy(q, p, sizeof q);
  q[120 + 8] ^= 1; /* the type */
  CHECK(cnnc_seal_find(q, n) == 0, "a note of another type is not the seal");
  memcpy(q, p, sizeof q);
  q[64] = 1; /* PT_LOAD, not PT_NOTE */
  CHECK(cnnc_seal_find(q, n) == 0, "no PT_NOTE, no seal");
  memcpy(q, p, sizeof q);
  q[64 + 32] = 200; /* p_filesz past the end */
  CHECK(cnnc_seal_find(q, n) == 0, "a note segment past the end is not read");
  CHECK(cnnc_seal_find(p, 100) == 0, "a cut image: no seal");
}

int main(void) {
  test_vectors();
  test_hole();
  test_note();
  return check_done("test_seal", g_failures);
}
