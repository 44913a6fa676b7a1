/* cnnc_seal.h — the checksum note of a model .so: part of the contract between codegen (which
 * writes it, codegen/cg_link.c) and the runtime (which checks it before dlopen, rt_elf.c).
 * Header-only.  Not a user header.
 *
 * Every .so cnnc links carries, in a PT_NOTE segment, one ELF note named "cnnc" of type
 * CNNC_SEAL_NOTE_TYPE whose 24-byte descriptor is
 *   u32 version (CNNC_SEAL_VERSION), u32 reserved (0), u64 file_bytes, u64 hash
 * (little endian): file_bytes is the size of the whole file and hash the XXH64 (seed 0) of
 * all its bytes with the 8 bytes of `hash` read as zero.  So any change to the file after
 * cnnc wrote it — a flipped byte anywhere, code, weights, descriptor or ELF tables, a
 * truncation or appended bytes — is seen at open, before the dynamic loader reads it.  The
 * global that holds the note is exported as CNNC_SEAL_SYMBOL, a second way to know that a
 * file was sealed when its PT_NOTE is damaged. */
#ifndef CNNC_SEAL_H
#define CNNC_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CNNC_SEAL_NOTE_NAME "cnnc"     /* namesz 5, padded to 8 */
#define CNNC_SEAL_NOTE_TYPE 0x4c414553u /* "SEAL" */
#define CNNC_SEAL_VERSION 1u
#define CNNC_SEAL_SYMBOL "cnnc_seal_v1"
#define CNNC_SEAL_DESC_BYTES 24u
#define CNNC_SEAL_NOTE_BYTES 44u /* 12-byte note header + 8 name + 24 desc */
#define CNNC_SEAL_HASH_AT 16u    /* offset of `hash` in the descriptor */

static inline uint64_t cnnc_seal_le64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

static inline uint32_t cnnc_seal_le32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

static inline void cnnc_seal_put64(unsigned char *p, uint64_t v) {
  for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
}

/* The note's bytes before sealing (file_bytes and hash zero). */
static inline void cnnc_seal_template(unsigned char out[CNNC_SEAL_NOTE_BYTES]) {
  static const unsigned char head[20] = {5, 0, 0, 0, CNNC_SEAL_DESC_BYTES, 0, 0, 0, 'S', 'E', 'A', 'L',
                                         'c', 'n', 'n', 'c', 0, 0, 0, 0};
  memset(out, 0, CNNC_SEAL_NOTE_BYTES);
  memcpy(out, head, sizeof head);
  out[20] = (unsigned char)CNNC_SEAL_VERSION;
}

/* ---- XXH64 -------------------------------------------------------------------------------- */
#define CNNC_XXH_P1 0x9E3779B185EBCA87ull
#define CNNC_XXH_P2 0xC2B2AE3D27D4EB4Full
#define CNNC_XXH_P3 0x165667B19E3779F9ull
#define CNNC_XXH_P4 0x85EBCA77C2B2AE63ull
#define CNNC_XXH_P5 0x27D4EB2F165667C5ull

static inline uint64_t cnnc_xxh_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t cnnc_xxh_round(uint64_t acc, uint64_t in) {
  acc += in * CNNC_XXH_P2;
  return cnnc_xxh_rotl(acc, 31) * CNNC_XXH_P1;
}
static inline uint64_t cnnc_xxh_merge(uint64_t acc, uint64_t v) {
  acc ^= cnnc_xxh_round(0, v);
  return acc * CNNC_XXH_P1 + CNNC_XXH_P4;
}

/* p[at .. at+len) with the bytes of [hole, hole+8) read as zero, into tmp (len <= 32);
 * returns tmp, or p + at when the range misses the hole. */
static inline const unsigned char *cnnc_seal_span(const unsigned char *p, size_t at, size_t len, size_t hole,
                                                  unsigned char *tmp) {
  if (hole >= at + len || hole + 8 <= at) return p + at;
  memcpy(tmp, p + at, len);
  size_t a = hole > at ? hole - at : 0, b = hole + 8 - at < len ? hole + 8 - at : len;
  memset(tmp + a, 0, b - a);
  return tmp;
}

/* XXH64 (seed 0) of p[0 .. n) with p[hole .. hole+8) read as zero (hole >= n: no hole). */
static inline uint64_t cnnc_seal_hash(const unsigned char *p, size_t n, size_t hole) {
  unsigned char tmp[32];
  size_t i = 0;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = CNNC_XXH_P1 + CNNC_XXH_P2, v2 = CNNC_XXH_P2, v3 = 0, v4 = 0 - CNNC_XXH_P1;
    for (; i + 32 <= n; i += 32) {
      const unsigned char *s = cnnc_seal_span(p, i, 32, hole, tmp);
      v1 = cnnc_xxh_round(v1, cnnc_seal_le64(s));
      v2 = cnnc_xxh_round(v2, cnnc_seal_le64(s + 8));
      v3 = cnnc_xxh_round(v3, cnnc_seal_le64(s + 16));
      v4 = cnnc_xxh_round(v4, cnnc_seal_le64(s + 24));
    }
    h = cnnc_xxh_rotl(v1, 1) + cnnc_xxh_rotl(v2, 7) + cnnc_xxh_rotl(v3, 12) + cnnc_xxh_rotl(v4, 18);
    h = cnnc_xxh_merge(h, v1), h = cnnc_xxh_merge(h, v2), h = cnnc_xxh_merge(h, v3), h = cnnc_xxh_merge(h, v4);
  } else {
    h = CNNC_XXH_P5;
  }
  h += (uint64_t)n;
  size_t left = n - i;
  const unsigned char *s = cnnc_seal_span(p, i, left, hole, tmp);
  size_t k = 0;
  for (; k + 8 <= left; k += 8) h = cnnc_xxh_rotl(h ^ cnnc_xxh_round(0, cnnc_seal_le64(s + k)), 27) * CNNC_XXH_P1 + CNNC_XXH_P4;
  if (k + 4 <= left) h = cnnc_xxh_rotl(h ^ (uint64_t)cnnc_seal_le32(s + k) * CNNC_XXH_P1, 23) * CNNC_XXH_P2 + CNNC_XXH_P3, k += 4;
  for (; k < left; k++) h = cnnc_xxh_rotl(h ^ s[k] * CNNC_XXH_P5, 11) * CNNC_XXH_P1;
  h ^= h >> 33;
  h *= CNNC_XXH_P2;
  h ^= h >> 29;
  h *= CNNC_XXH_P3;
  h ^= h >> 32;
  return h;
}

/* ---- finding the note ---------------------------------------------------------------------- */
/* The file offset of the seal note's descriptor in the ELF64 little-endian image p[0 .. n),
 * looked up through the program headers' PT_NOTE segments, or 0 if there is none (or the
 * image is too damaged to say).  Every read is bounds-checked. */
static inline size_t cnnc_seal_find(const unsigned char *p, size_t n) {
  if (n < 64 || memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 || p[5] != 1) return 0;
  uint64_t phoff = cnnc_seal_le64(p + 32);
  unsigned phent = p[54] | (unsigned)p[55] << 8, phnum = p[56] | (unsigned)p[57] << 8;
  if (phent != 56 || phoff > n || (uint64_t)phnum * 56 > n - phoff) return 0;
  for (unsigned i = 0; i < phnum; i++) {
    const unsigned char *ph = p + phoff + 56 * (size_t)i;
    if (cnnc_seal_le32(ph) != 4 /* PT_NOTE */) continue;
    uint64_t off = cnnc_seal_le64(ph + 8), sz = cnnc_seal_le64(ph + 32), align = cnnc_seal_le64(ph + 48);
    if (off > n || sz > n - off) continue;
    uint64_t a = align == 8 ? 8 : 4, at = 0;
    while (sz - at >= 12) {
      const unsigned char *nt = p + off + at;
      uint64_t namesz = cnnc_seal_le32(nt), descsz = cnnc_seal_le32(nt + 4), type = cnnc_seal_le32(nt + 8);
      uint64_t name_at = at + 12, desc_at = name_at + ((namesz + a - 1) & ~(a - 1));
      uint64_t next = desc_at + ((descsz + a - 1) & ~(a - 1));
      if (next > sz) break;
      if (type == CNNC_SEAL_NOTE_TYPE && namesz == 5 && descsz == CNNC_SEAL_DESC_BYTES &&
          memcmp(p + off + name_at, CNNC_SEAL_NOTE_NAME, 5) == 0)
        return (size_t)(off + desc_at);
      at = next;
    }
  }
  return 0;
}

/* Seals the image in place (the note found by cnnc_seal_find at desc): writes file_bytes
 * and the hash. */
static inline void cnnc_seal_write(unsigned char *p, size_t n, size_t desc) {
  cnnc_seal_put64(p + desc + 8, (uint64_t)n);
  cnnc_seal_put64(p + desc + CNNC_SEAL_HASH_AT, 0);
  cnnc_seal_put64(p + desc + CNNC_SEAL_HASH_AT, cnnc_seal_hash(p, n, desc + CNNC_SEAL_HASH_AT));
}

#endif
